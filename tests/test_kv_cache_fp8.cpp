// FP8 KV caches (KvCache / PagedKvCache of float8_e4m3 / float8_e5m2 with k_scale, v_scale).
// Expected values: the stored codes against the nearest code (tests/support/float8_spec.hpp) of
// the key rotated in long double and divided by k_scale; attention against softmax written out
// in long double over the codes' closed-form values times the scales.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "posenc/alibi.hpp"
#include "posenc/attention_paged.hpp"
#include "posenc/float8.hpp"
#include "posenc/kv_cache.hpp"
#include "posenc/paged_kv_cache.hpp"
#include "posenc/rope_frequencies.hpp"
#include "support/float8_spec.hpp"

namespace {

namespace fp8 = posenc_test::fp8;
using posenc::ConstTensorView;
using posenc::TensorView;

template <typename F>
const fp8::Spec& spec_of() {
  return std::is_same_v<F, posenc::float8_e4m3> ? fp8::kE4M3 : fp8::kE5M2;
}

/// The stored code is the nearest code of x, or x lies within float noise of the midpoint
/// between it and the nearest (the cache rotates and divides in float).
bool code_fits(const fp8::Spec& s, long double x, int code) {
  const int want = fp8::spec_nearest(s, x);
  if (code == want) return true;
  if (fp8::spec_is_nan(s, code) || fp8::spec_is_inf(s, code)) return false;
  const long double d_got = std::fabs(fp8::spec_value(s, code) - x);
  const long double d_want = std::fabs(fp8::spec_value(s, want) - x);
  return d_got - d_want <= 1e-5L * std::max(std::fabs(x), 1e-3L);
}

posenc::RopeFrequencies plan(Eigen::Index d) {
  posenc::RopeParams p;
  p.head_dim = d;
  p.theta = 10000.0;
  return posenc::compute_rope_frequencies(p);
}

/// R(p) x of one head vector in long double: pairs (j, j + d/2) (half-split) or (2j, 2j + 1).
std::vector<long double> turn(const std::vector<long double>& x, const std::vector<double>& inv_freq,
                              long double p, posenc::RopeLayout layout) {
  const auto half = static_cast<std::ptrdiff_t>(inv_freq.size());
  std::vector<long double> y = x;
  for (std::ptrdiff_t j = 0; j < half; ++j) {
    const std::ptrdiff_t a = layout == posenc::RopeLayout::kHalfSplit ? j : 2 * j;
    const std::ptrdiff_t b = layout == posenc::RopeLayout::kHalfSplit ? j + half : 2 * j + 1;
    const long double angle = p * static_cast<long double>(inv_freq[static_cast<std::size_t>(j)]);
    const long double c = std::cos(angle), s = std::sin(angle);
    y[static_cast<std::size_t>(a)] = x[static_cast<std::size_t>(a)] * c - x[static_cast<std::size_t>(b)] * s;
    y[static_cast<std::size_t>(b)] = x[static_cast<std::size_t>(b)] * c + x[static_cast<std::size_t>(a)] * s;
  }
  return y;
}

std::vector<float> normal(std::size_t n, float sigma, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

template <typename F>
long double value_of(F code, long double scale) {
  if (fp8::spec_is_nan(spec_of<F>(), code.bits)) return std::numeric_limits<long double>::quiet_NaN();
  return fp8::spec_value(spec_of<F>(), code.bits) * scale;
}

enum class Positional { kRopeHalfSplit, kRopeInterleaved, kAlibi };

/// One query row (sequence b, slot `slot`, head h) in long double over the cache's stored codes:
/// slots [0, slot] of sequence b, causal on slots, ALiBi on the stored positions.
template <typename F>
std::vector<long double> reference_row(const posenc::KvCache<F>& cache, const float* q_row,
                                       Eigen::Index b, Eigen::Index slot, Eigen::Index h,
                                       Eigen::Index heads, Positional positional,
                                       const std::vector<double>& inv_freq,
                                       const std::vector<double>& slopes) {
  const Eigen::Index d = cache.head_dim(), kvh = cache.kv_heads(), g = h / (heads / kvh);
  const auto keys = cache.keys();
  const auto values = cache.values();
  const auto pos = cache.positions();
  std::vector<long double> q(q_row, q_row + d);
  if (positional != Positional::kAlibi) {
    q = turn(q, inv_freq, static_cast<long double>(pos(b, slot)),
             positional == Positional::kRopeHalfSplit ? posenc::RopeLayout::kHalfSplit
                                                      : posenc::RopeLayout::kInterleaved);
  }
  const long double scale = 1.0L / std::sqrt(static_cast<long double>(d));
  std::vector<long double> logits;
  for (Eigen::Index j = 0; j <= slot; ++j) {
    long double dot = 0;
    for (Eigen::Index c = 0; c < d; ++c) {
      dot += q[static_cast<std::size_t>(c)] * value_of(keys(b, j, g, c), cache.scales().k_of(g));
    }
    long double logit = scale * dot;
    if (positional == Positional::kAlibi) {
      logit -= slopes[static_cast<std::size_t>(h)] * static_cast<long double>(pos(b, slot) - pos(b, j));
    }
    logits.push_back(logit);
  }
  long double m = -std::numeric_limits<long double>::infinity(), sum = 0;
  for (const long double l : logits) m = std::max(m, l);
  for (auto& l : logits) sum += (l = std::exp(l - m));
  std::vector<long double> out(static_cast<std::size_t>(d), 0.0L);
  for (Eigen::Index j = 0; j <= slot; ++j) {
    for (Eigen::Index c = 0; c < d; ++c) {
      out[static_cast<std::size_t>(c)] += logits[static_cast<std::size_t>(j)] / sum *
                                          value_of(values(b, j, g, c), cache.scales().v_of(g));
    }
  }
  return out;
}

// IEEE: a value row holding NaN, weighted by a softmax weight > 0, makes that output column NaN
// in every query head that reads its kv head; every other output stays finite. out is one
// query row [heads, d]; the NaN sits in kv head 0, read by query heads [0, nan_heads).
void require_nan_column_only(const std::vector<float>& out, Eigen::Index heads, Eigen::Index d,
                             Eigen::Index nan_heads, Eigen::Index column) {
  for (Eigen::Index h = 0; h < heads; ++h) {
    for (Eigen::Index c = 0; c < d; ++c) {
      const bool nan_column = h < nan_heads && c == column;
      const float x = out[static_cast<std::size_t>(h * d + c)];
      INFO("head " << h << " column " << c << " value " << x);
      REQUIRE(std::isnan(x) == nan_column);
      if (!nan_column) REQUIRE(std::isfinite(x));
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("kv_cache fp8: append stores the key rotated in float, divided by k_scale and "
                   "rounded once (saturating), the value divided by v_scale",
                   "[kv_cache][fp8]", posenc::float8_e4m3, posenc::float8_e5m2) {
  using F = TestType;
  const fp8::Spec& s = spec_of<F>();
  constexpr Eigen::Index B = 2, N = 9, KVH = 2, D = 64;
  const posenc::KvScales scales{0.05, 0.02};
  for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
    auto k = normal(B * N * KVH * D, 4.0f, 1);
    const auto v = normal(B * N * KVH * D, 1.0f, 2);
    k[5] = 1000.0f;   // 20000 k_scale: E4M3 saturates at 448, E5M2 holds it
    k[70] = -30.0f;   // -600 k_scale
    std::vector<std::int64_t> pos(B * N);
    for (Eigen::Index i = 0; i < B * N; ++i) pos[static_cast<std::size_t>(i)] = 3 * (i / N) + i % N + 1000;
    posenc::KvCache<F> cache(B, 16, KVH, D);
    cache.set_scales(scales);
    const auto freqs = plan(D);
    cache.set_rope(freqs, layout);
    cache.append(ConstTensorView<float, 4>(k.data(), B, N, KVH, D),
                 ConstTensorView<float, 4>(v.data(), B, N, KVH, D),
                 posenc::PositionIdsView(pos.data(), B, N));
    const auto keys = cache.keys();
    const auto values = cache.values();
    int saturated = 0;
    for (Eigen::Index b = 0; b < B; ++b) {
      for (Eigen::Index t = 0; t < N; ++t) {
        for (Eigen::Index g = 0; g < KVH; ++g) {
          const float* row = k.data() + ((b * N + t) * KVH + g) * D;
          const auto want = turn(std::vector<long double>(row, row + D), freqs.inv_freq,
                                 static_cast<long double>(pos[static_cast<std::size_t>(b * N + t)]), layout);
          for (Eigen::Index c = 0; c < D; ++c) {
            const long double x = want[static_cast<std::size_t>(c)] / scales.k;
            INFO("b " << b << " t " << t << " g " << g << " c " << c << " x " << static_cast<double>(x));
            REQUIRE(code_fits(s, x, keys(b, t, g, c).bits));
            saturated += std::fabs(x) > posenc::detail::Float8E4M3Format::decode(0x7E);
            const long double y = static_cast<long double>(v[static_cast<std::size_t>(((b * N + t) * KVH + g) * D + c)]) / scales.v;
            REQUIRE(code_fits(s, y, values(b, t, g, c).bits));
          }
        }
      }
    }
    CHECK(saturated > 0);  // the large keys reached past E4M3's 448
  }
}

TEMPLATE_TEST_CASE("kv_cache fp8: prefill, a chunk and decode steps equal long-double attention "
                   "over the codes times the scales",
                   "[kv_cache][fp8]", posenc::float8_e4m3, posenc::float8_e5m2) {
  using F = TestType;
  constexpr Eigen::Index B = 2, H = 8, KVH = 2;
  const std::vector<double> slopes = posenc::alibi_slopes(H);
  // Per-tensor scales, and per kv head (compressed-tensors' "attn_head" strategy).
  const posenc::KvScales per_tensor{0.03, 0.011};
  const auto per_head = posenc::KvScales::per_head({0.03, 0.07}, {0.011, 0.025});
  for (const Eigen::Index D : {64, 72, 12}) {
    for (const auto positional :
         {Positional::kRopeHalfSplit, Positional::kRopeInterleaved, Positional::kAlibi}) {
     for (const posenc::KvScales* scales : {&per_tensor, &per_head}) {
      INFO("D " << D << " positional " << static_cast<int>(positional) << " per head "
                << !scales->k_heads.empty());
      const auto freqs = plan(D);
      posenc::KvCache<F> cache(B, 40, KVH, D);
      cache.set_scales(*scales);
      posenc::AttentionParams params;
      if (positional == Positional::kAlibi) {
        params.alibi_slopes = slopes;
      } else {
        cache.set_rope(freqs, positional == Positional::kRopeHalfSplit
                                  ? posenc::RopeLayout::kHalfSplit
                                  : posenc::RopeLayout::kInterleaved);
      }
      std::int64_t next = 0;
      std::uint32_t seed = 10;
      // Prefill 21 tokens, then a chunk of 5 attended together, then 3 single-token steps.
      for (const Eigen::Index n : {21, 5, 1, 1, 1}) {
        const auto k = normal(static_cast<std::size_t>(B * n * KVH * D), 1.0f, seed++);
        const auto v = normal(static_cast<std::size_t>(B * n * KVH * D), 1.0f, seed++);
        const auto q = normal(static_cast<std::size_t>(B * n * H * D), 1.0f, seed++);
        std::vector<std::int64_t> pos(static_cast<std::size_t>(B * n));
        for (Eigen::Index b = 0; b < B; ++b) {
          for (Eigen::Index t = 0; t < n; ++t) pos[static_cast<std::size_t>(b * n + t)] = next + t + 7 * b;
        }
        cache.append(ConstTensorView<float, 4>(k.data(), B, n, KVH, D),
                     ConstTensorView<float, 4>(v.data(), B, n, KVH, D),
                     posenc::PositionIdsView(pos.data(), B, n));
        next += n;
        if (n == 21) continue;
        std::vector<float> out(static_cast<std::size_t>(B * n * H * D));
        cache.attend(ConstTensorView<float, 4>(q.data(), B, n, H, D),
                     TensorView<float, 4>(out.data(), B, n, H, D), params);
        for (Eigen::Index b = 0; b < B; ++b) {
          for (Eigen::Index i = 0; i < n; ++i) {
            for (Eigen::Index h = 0; h < H; ++h) {
              const auto want = reference_row(cache, q.data() + ((b * n + i) * H + h) * D, b,
                                              cache.size() - n + i, h, H, positional,
                                              freqs.inv_freq, slopes);
              for (Eigen::Index c = 0; c < D; ++c) {
                const float got = out[static_cast<std::size_t>(((b * n + i) * H + h) * D + c)];
                REQUIRE(got == Approx(static_cast<double>(want[static_cast<std::size_t>(c)]))
                                   .margin(2e-6));
              }
            }
          }
        }
      }
     }
    }
  }
}

TEMPLATE_TEST_CASE("kv_cache fp8: per-head scales store each kv head divided by its own scale, "
                   "and equal scales read as the per-tensor cache, bit for bit",
                   "[kv_cache][fp8]", posenc::float8_e4m3, posenc::float8_e5m2) {
  using F = TestType;
  const fp8::Spec& sp = spec_of<F>();
  constexpr Eigen::Index KVH = 3, D = 8, H = 6, N = 5;
  // x = 1 everywhere: head g stores 1 / k_g and 1 / v_g, exact powers of two in both formats.
  const auto scales = posenc::KvScales::per_head({0.5, 1.0, 4.0}, {0.25, 2.0, 1.0});
  const std::vector<float> ones(N * KVH * D, 1.0f);
  std::vector<std::int64_t> pos(N);
  for (Eigen::Index i = 0; i < N; ++i) pos[static_cast<std::size_t>(i)] = i;
  posenc::KvCache<F> cache(1, N, KVH, D);
  cache.set_scales(scales);
  cache.append(ConstTensorView<float, 4>(ones.data(), 1, N, KVH, D),
               ConstTensorView<float, 4>(ones.data(), 1, N, KVH, D),
               posenc::PositionIdsView(pos.data(), 1, N));
  posenc::PagedKvCache<F> pool(4, 2, KVH, D);
  pool.set_scales(scales);
  const auto s = pool.add_sequence();
  pool.append(s, ConstTensorView<float, 3>(ones.data(), N, KVH, D),
              ConstTensorView<float, 3>(ones.data(), N, KVH, D));
  const long double want_k[KVH] = {2.0L, 1.0L, 0.25L}, want_v[KVH] = {4.0L, 0.5L, 1.0L};
  for (Eigen::Index t = 0; t < N; ++t) {
    const auto page = pool.pages(s)[static_cast<std::size_t>(t / 2)];
    for (Eigen::Index g = 0; g < KVH; ++g) {
      CAPTURE(t, g);
      CHECK(fp8::spec_value(sp, cache.keys()(0, t, g, 3).bits) == want_k[g]);
      CHECK(fp8::spec_value(sp, cache.values()(0, t, g, 5).bits) == want_v[g]);
      CHECK(pool.key_pages()(page, t % 2, g, 3) == cache.keys()(0, t, g, 3));
      CHECK(pool.value_pages()(page, t % 2, g, 5) == cache.values()(0, t, g, 5));
    }
  }
  // The pool attends as the cache does, through attention_paged with the per-head scales.
  const auto qs = normal(H * D, 1.0f, 30);
  std::vector<float> from_pool(H * D), from_cache(H * D);
  pool.attend({s}, ConstTensorView<float, 4>(qs.data(), 1, 1, H, D),
              TensorView<float, 4>(from_pool.data(), 1, 1, H, D));
  cache.attend(ConstTensorView<float, 4>(qs.data(), 1, 1, H, D),
               TensorView<float, 4>(from_cache.data(), 1, 1, H, D));
  for (std::size_t i = 0; i < from_cache.size(); ++i) {
    REQUIRE(from_pool[i] == Approx(from_cache[i]).margin(1e-6));
  }
  // Every value of kv head g is 1 / v_g stored, read back as 1: each output is 1.
  for (const float o : from_cache) REQUIRE(o == Approx(1.0f).margin(1e-6));

  // The same scale on every head is the per-tensor cache: identical codes and outputs.
  const auto k = normal(N * KVH * D, 1.0f, 31), v = normal(N * KVH * D, 1.0f, 32);
  const auto q = normal(N * H * D, 1.0f, 33);
  posenc::KvCache<F> a(1, N, KVH, D), b(1, N, KVH, D);
  a.set_scales({0.05, 0.02});
  b.set_scales(posenc::KvScales::per_head({0.05, 0.05, 0.05}, {0.02, 0.02, 0.02}));
  std::vector<float> out_a(N * H * D), out_b(N * H * D);
  for (auto* c : {&a, &b}) {
    c->set_rope(plan(D), posenc::RopeLayout::kHalfSplit);
    c->append(ConstTensorView<float, 4>(k.data(), 1, N, KVH, D),
              ConstTensorView<float, 4>(v.data(), 1, N, KVH, D), posenc::PositionIdsView(pos.data(), 1, N));
    c->attend(ConstTensorView<float, 4>(q.data(), 1, N, H, D),
              TensorView<float, 4>((c == &a ? out_a : out_b).data(), 1, N, H, D));
  }
  CHECK(out_a == out_b);
  for (Eigen::Index i = 0; i < N * KVH * D; ++i) {
    REQUIRE(a.keys().data()[i] == b.keys().data()[i]);
  }
}


TEMPLATE_TEST_CASE("kv_cache fp8: codes read as a float cache holding their values, NaN "
                   "included",
                   "[kv_cache][fp8]", posenc::float8_e4m3, posenc::float8_e5m2) {
  using F = TestType;
  constexpr Eigen::Index N = 33, H = 4, KVH = 2, D = 64;
  auto k = normal(N * KVH * D, 2.0f, 3);
  const auto v = normal(N * KVH * D, 2.0f, 4);
  k[3 * KVH * D + 5] = std::numeric_limits<float>::quiet_NaN();  // token 3, kv head 0
  const auto q = normal(H * D, 1.0f, 5);
  std::vector<std::int64_t> pos(N);
  for (Eigen::Index i = 0; i < N; ++i) pos[static_cast<std::size_t>(i)] = i;
  posenc::KvCache<F> quantised(1, N, KVH, D);
  quantised.set_scales({0.5, 0.25});
  quantised.append(ConstTensorView<float, 4>(k.data(), 1, N, KVH, D),
                   ConstTensorView<float, 4>(v.data(), 1, N, KVH, D),
                   posenc::PositionIdsView(pos.data(), 1, N));
  // The same cache in float: each code's value (spec) times its scale.
  std::vector<float> kf(k.size()), vf(v.size());
  for (std::size_t i = 0; i < k.size(); ++i) {
    kf[i] = static_cast<float>(value_of(quantised.keys().data()[i], 0.5L));
    vf[i] = static_cast<float>(value_of(quantised.values().data()[i], 0.25L));
  }
  REQUIRE(std::isnan(kf[3 * KVH * D + 5]));
  posenc::KvCache<float> plain(1, N, KVH, D);
  plain.append(ConstTensorView<float, 4>(kf.data(), 1, N, KVH, D),
               ConstTensorView<float, 4>(vf.data(), 1, N, KVH, D),
               posenc::PositionIdsView(pos.data(), 1, N));
  std::vector<float> got(H * D), want(H * D);
  quantised.attend(ConstTensorView<float, 4>(q.data(), 1, 1, H, D),
                   TensorView<float, 4>(got.data(), 1, 1, H, D));
  plain.attend(ConstTensorView<float, 4>(q.data(), 1, 1, H, D),
               TensorView<float, 4>(want.data(), 1, 1, H, D));
  // The same codes in a page pool.
  posenc::PagedKvCache<F> pool(5, 8, KVH, D);
  pool.set_scales({0.5, 0.25});
  const auto s = pool.add_sequence();
  pool.append(s, ConstTensorView<float, 3>(k.data(), N, KVH, D),
              ConstTensorView<float, 3>(v.data(), N, KVH, D));
  std::vector<float> paged(H * D);
  pool.attend({s}, ConstTensorView<float, 4>(q.data(), 1, 1, H, D),
              TensorView<float, 4>(paged.data(), 1, 1, H, D));
  // And the pool's pages through attention_paged with its scales (a pool of one's own).
  std::vector<float> own(H * D);
  const auto& pages = pool.pages(s);
  const std::int64_t len = N;
  posenc::attention_paged<float, F>(
      ConstTensorView<float, 4>(q.data(), 1, 1, H, D), pool.key_pages(), pool.value_pages(),
      ConstTensorView<std::int32_t, 2>(pages.data(), 1, static_cast<Eigen::Index>(pages.size())),
      ConstTensorView<std::int64_t, 1>(&len, 1), TensorView<float, 4>(own.data(), 1, 1, H, D),
      {}, nullptr, std::nullopt, pool.scales());
  for (const auto* out : {&got, &paged, &own}) {
    int nans = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      INFO("element " << i << (out == &got ? " (KvCache)" : out == &paged ? " (PagedKvCache)" : " (attention_paged)"));
      REQUIRE(std::isnan((*out)[i]) == std::isnan(want[i]));
      nans += std::isnan((*out)[i]);
      if (!std::isnan(want[i])) REQUIRE((*out)[i] == Approx(want[i]).margin(1e-6));
    }
    CHECK(nans == 2 * D);  // the two query heads of kv head 0
  }
}

TEMPLATE_TEST_CASE("kv_cache fp8: update_rope and shift_positions turn the codes' values and "
                   "round them once more",
                   "[kv_cache][fp8]", posenc::float8_e4m3, posenc::float8_e5m2) {
  using F = TestType;
  const fp8::Spec& s = spec_of<F>();
  constexpr Eigen::Index N = 12, KVH = 2, D = 32;
  const auto layout = posenc::RopeLayout::kInterleaved;
  const auto old_plan = plan(D);
  posenc::RopeParams p;
  p.head_dim = D;
  p.theta = 10000.0;
  p.scaling.type = posenc::RopeScalingType::kLinear;
  p.scaling.factor = 4.0;
  const auto new_plan = posenc::compute_rope_frequencies(p);
  const auto k = normal(N * KVH * D, 1.0f, 6);
  const auto v = normal(N * KVH * D, 1.0f, 7);
  std::vector<std::int64_t> pos(N);
  for (Eigen::Index i = 0; i < N; ++i) pos[static_cast<std::size_t>(i)] = 100 + 9 * i;
  posenc::KvCache<F> cache(1, N, KVH, D);
  cache.set_scales({0.01, 0.01});
  cache.set_rope(old_plan, layout);
  cache.append(ConstTensorView<float, 4>(k.data(), 1, N, KVH, D),
               ConstTensorView<float, 4>(v.data(), 1, N, KVH, D),
               posenc::PositionIdsView(pos.data(), 1, N));
  // Each stored row turned by angle(p) of the new plan minus that of the old (update_rope), or
  // by delta of the plan (shift_positions): the code values (in units of k_scale) turned in long
  // double, then the nearest code.
  const auto check_turned = [&](const std::vector<std::uint8_t>& before, auto&& angle_of) {
    const auto keys = cache.keys();
    for (Eigen::Index t = 0; t < N; ++t) {
      for (Eigen::Index g = 0; g < KVH; ++g) {
        for (Eigen::Index j = 0; j < D / 2; ++j) {
          const std::size_t at = static_cast<std::size_t>((t * KVH + g) * D);
          const long double x1 = fp8::spec_value(s, before[at + 2 * j]);
          const long double x2 = fp8::spec_value(s, before[at + 2 * j + 1]);
          const long double a = angle_of(t, j);
          INFO("t " << t << " g " << g << " pair " << j);
          REQUIRE(code_fits(s, x1 * std::cos(a) - x2 * std::sin(a), keys(0, t, g, 2 * j).bits));
          REQUIRE(code_fits(s, x2 * std::cos(a) + x1 * std::sin(a), keys(0, t, g, 2 * j + 1).bits));
        }
      }
    }
  };
  const auto codes = [&] {
    std::vector<std::uint8_t> c;
    for (Eigen::Index i = 0; i < N * KVH * D; ++i) c.push_back(cache.keys().data()[i].bits);
    return c;
  };
  auto before = codes();
  cache.update_rope(new_plan);
  check_turned(before, [&](Eigen::Index t, Eigen::Index j) {
    const auto pj = static_cast<long double>(pos[static_cast<std::size_t>(t)]);
    return pj * new_plan.inv_freq[static_cast<std::size_t>(j)] -
           pj * old_plan.inv_freq[static_cast<std::size_t>(j)];
  });
  before = codes();
  cache.shift_positions(0, N, -37);
  check_turned(before, [&](Eigen::Index, Eigen::Index j) {
    return -37.0L * new_plan.inv_freq[static_cast<std::size_t>(j)];
  });
  CHECK(cache.positions()(0, 0) == 63);
}

TEMPLATE_TEST_CASE("paged kv cache fp8: pages hold the same codes as a KvCache and attend to the "
                   "same output, a fork included",
                   "[paged_kv_cache][fp8]", posenc::float8_e4m3, posenc::float8_e5m2) {
  using F = TestType;
  constexpr Eigen::Index N = 11, H = 4, KVH = 2, D = 64, P = 4;
  const auto freqs = plan(D);
  const auto k = normal(N * KVH * D, 1.0f, 8);
  const auto v = normal(N * KVH * D, 1.0f, 9);
  const auto q = normal(H * D, 1.0f, 10);
  const posenc::KvScales scales{0.02, 0.04};
  posenc::PagedKvCache<F> pool(8, P, KVH, D);
  pool.set_scales(scales);
  pool.set_rope(freqs, posenc::RopeLayout::kHalfSplit);
  posenc::KvCache<F> flat(1, N + 1, KVH, D);
  flat.set_scales(scales);
  flat.set_rope(freqs, posenc::RopeLayout::kHalfSplit);
  std::vector<std::int64_t> pos(N);
  for (Eigen::Index i = 0; i < N; ++i) pos[static_cast<std::size_t>(i)] = i;
  const auto s = pool.add_sequence();
  pool.append(s, ConstTensorView<float, 3>(k.data(), N, KVH, D),
              ConstTensorView<float, 3>(v.data(), N, KVH, D));
  flat.append(ConstTensorView<float, 4>(k.data(), 1, N, KVH, D),
              ConstTensorView<float, 4>(v.data(), 1, N, KVH, D),
              posenc::PositionIdsView(pos.data(), 1, N));
  const auto c = pool.fork(s);
  for (Eigen::Index t = 0; t < N; ++t) {
    const auto page = pool.pages(c)[static_cast<std::size_t>(t / P)];
    for (Eigen::Index g = 0; g < KVH; ++g) {
      for (Eigen::Index e = 0; e < D; ++e) {
        REQUIRE(pool.key_pages()(page, t % P, g, e) == flat.keys()(0, t, g, e));
        REQUIRE(pool.value_pages()(page, t % P, g, e) == flat.values()(0, t, g, e));
      }
    }
  }
  std::vector<float> got(2 * H * D), want(H * D);
  std::vector<float> q2(2 * H * D);
  std::copy(q.begin(), q.end(), q2.begin());
  std::copy(q.begin(), q.end(), q2.begin() + H * D);
  pool.attend({s, c}, ConstTensorView<float, 4>(q2.data(), 2, 1, H, D),
              TensorView<float, 4>(got.data(), 2, 1, H, D));
  flat.attend(ConstTensorView<float, 4>(q.data(), 1, 1, H, D),
              TensorView<float, 4>(want.data(), 1, 1, H, D));
  for (std::size_t i = 0; i < want.size(); ++i) {
    REQUIRE(got[i] == Approx(want[i]).margin(1e-6));
    REQUIRE(got[i + want.size()] == Approx(want[i]).margin(1e-6));
  }
}

TEST_CASE("kv_cache fp8: bad scales throw std::invalid_argument naming them, changing nothing",
          "[kv_cache][fp8][errors]") {
  using F = posenc::float8_e4m3;
  posenc::KvCache<F> cache(1, 4, 1, 8);
  cache.set_scales({0.5, 0.25});
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const posenc::KvScales& bad : {posenc::KvScales{0.0, 1.0}, posenc::KvScales{-1.0, 1.0},
                                     posenc::KvScales{nan, 1.0}, posenc::KvScales{inf, 1.0}}) {
    REQUIRE_THROWS_AS(cache.set_scales(bad), std::invalid_argument);
    REQUIRE_THROWS_WITH(cache.set_scales(bad), Catch::Matchers::Contains("k_scale"));
  }
  REQUIRE_THROWS_AS(cache.set_scales({1.0, 0.0}), std::invalid_argument);
  REQUIRE_THROWS_WITH(cache.set_scales({1.0, 0.0}), Catch::Matchers::Contains("v_scale = 0"));
  CHECK(cache.scales().k == 0.5);
  CHECK(cache.scales().v == 0.25);
  const std::vector<float> k(8, 1.0f);
  const std::int64_t p = 0;
  cache.append(ConstTensorView<float, 4>(k.data(), 1, 1, 1, 8),
               ConstTensorView<float, 4>(k.data(), 1, 1, 1, 8), posenc::PositionIdsView(&p, 1, 1));
  REQUIRE_THROWS_AS(cache.set_scales({1.0, 1.0}), std::invalid_argument);
  REQUIRE_THROWS_WITH(cache.set_scales({1.0, 1.0}), Catch::Matchers::Contains("before the first append"));
  CHECK(cache.scales().k == 0.5);
  CHECK(cache.keys()(0, 0, 0, 0).bits == F(2.0f).bits);  // 1 / 0.5
  cache.clear();
  cache.set_scales({1.0, 1.0});  // empty again
  CHECK(cache.scales().k == 1.0);

  {  // Per-head scales: one per kv head, each finite and > 0.
    posenc::KvCache<F> heads(1, 4, 2, 8);
    REQUIRE_THROWS_WITH(heads.set_scales(posenc::KvScales::per_head({0.5, 0.5, 0.5}, {})),
                        Catch::Matchers::Contains("k_heads has 3 scales; it must be empty or hold "
                                                  "one per kv head (2)"));
    REQUIRE_THROWS_WITH(heads.set_scales(posenc::KvScales::per_head({0.5, 0.5}, {1.0, nan})),
                        Catch::Matchers::Contains("v_heads[1] = nan must be in [FLT_MIN, FLT_MAX]"));
    CHECK(heads.scales().k_heads.empty());
  }
  auto latent = posenc::KvCache<F>::latent(1, 4, 1, 16, 8);
  REQUIRE_THROWS_AS(latent.set_scales(posenc::KvScales::per_head({0.5}, {0.25})),
                    std::invalid_argument);
  REQUIRE_THROWS_AS(latent.set_scales({0.5, 0.25}), std::invalid_argument);
  REQUIRE_THROWS_WITH(latent.set_scales({0.5, 0.25}), Catch::Matchers::Contains("latent"));
  latent.set_scales({0.5, 0.5});
  CHECK(latent.scales().v == 0.5);

  posenc::PagedKvCache<F> pool(4, 2, 1, 8);
  const auto s = pool.add_sequence();
  pool.append(s, ConstTensorView<float, 3>(k.data(), 1, 1, 8),
              ConstTensorView<float, 3>(k.data(), 1, 1, 8));
  REQUIRE_THROWS_AS(pool.set_scales({0.5, 0.5}), std::invalid_argument);
  REQUIRE_THROWS_WITH(pool.set_scales({0.5, 0.5}), Catch::Matchers::Contains("PagedKvCache::set_scales"));
  CHECK(pool.scales().k == 1.0);

  const std::int32_t table[1] = {0};
  const std::int64_t len = 1;
  std::vector<float> out(8, 7.0f);
  const auto call = [&] {
    posenc::attention_paged<float, F>(
        ConstTensorView<float, 4>(k.data(), 1, 1, 1, 8), pool.key_pages(), pool.value_pages(),
        ConstTensorView<std::int32_t, 2>(table, 1, 1), ConstTensorView<std::int64_t, 1>(&len, 1),
        TensorView<float, 4>(out.data(), 1, 1, 1, 8), {}, nullptr, std::nullopt, {1.0, -2.0});
  };
  REQUIRE_THROWS_AS(call(), std::invalid_argument);
  REQUIRE_THROWS_WITH(call(), Catch::Matchers::Contains("attention_paged") &&
                                  Catch::Matchers::Contains("v_scale = -2"));
  CHECK(out[0] == 7.0f);
}

TEST_CASE("kv_cache fp8: an absorbed-MLA latent cache of E4M3 rows reads as a float latent "
          "cache holding their values",
          "[kv_cache][fp8][mla]") {
  using F = posenc::float8_e4m3;
  // DeepSeek-like rows in miniature: [c_kv 64 | k_pe 16], values = the first 64; k_pe rotated.
  constexpr Eigen::Index N = 19, H = 8, D = 80, DV = 64;
  const auto kv = normal(N * D, 1.0f, 11);
  const auto q = normal(H * D, 1.0f, 12);
  std::vector<std::int64_t> pos(N);
  for (Eigen::Index i = 0; i < N; ++i) pos[static_cast<std::size_t>(i)] = 5 + i;
  posenc::RopeParams rp;
  rp.head_dim = D;
  rp.rotary_dim = 16;
  rp.rotary_offset = DV;
  const auto freqs = posenc::compute_rope_frequencies(rp);
  auto quantised = posenc::KvCache<F>::latent(1, N, 1, D, DV);
  quantised.set_scales({0.02, 0.02});
  quantised.set_rope(freqs, posenc::RopeLayout::kInterleaved);
  quantised.append_latent(ConstTensorView<float, 4>(kv.data(), 1, N, 1, D),
                          posenc::PositionIdsView(pos.data(), 1, N));
  std::vector<float> deq(kv.size());
  for (std::size_t i = 0; i < deq.size(); ++i) {
    deq[i] = static_cast<float>(value_of(quantised.keys().data()[i], 0.02L));
  }
  // The float cache gets the stored (already rotated) rows: no plan, queries rotated by hand.
  auto plain = posenc::KvCache<float>::latent(1, N, 1, D, DV);
  plain.append_latent(ConstTensorView<float, 4>(deq.data(), 1, N, 1, D),
                      posenc::PositionIdsView(pos.data(), 1, N));
  std::vector<float> q_rot = q;
  posenc::apply_rope_inplace<float>(
      posenc::rope_heads<float>(posenc::TensorView<float, 4>(q_rot.data(), 1, 1, H, D)),
      posenc::RopePositions::contiguous(1, 1, pos.back()), freqs, posenc::RopeLayout::kInterleaved);
  posenc::AttentionParams params;
  params.scale = 0.125;
  std::vector<float> got(H * DV), want(H * DV);
  quantised.attend(ConstTensorView<float, 4>(q.data(), 1, 1, H, D),
                   TensorView<float, 4>(got.data(), 1, 1, H, DV), params);
  plain.attend(ConstTensorView<float, 4>(q_rot.data(), 1, 1, H, D),
               TensorView<float, 4>(want.data(), 1, 1, H, DV), params);
  for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-6));
}

TEMPLATE_TEST_CASE("kv_cache fp8: rows appended from double, half and bfloat16 are rounded once "
                   "from their own values, and a NaN input is a NaN code that attend propagates",
                   "[kv_cache][fp8]", posenc::float8_e4m3, posenc::float8_e5m2) {
  // Each input type's values, divided by the scale, to the nearest code. The double path once
  // failed to compile for E4M3 (its NaN test called std::max on two different unsigned types).
  using F = TestType;
  const fp8::Spec& s = spec_of<F>();
  constexpr Eigen::Index B = 2, N = 5, KVH = 2, D = 32, H = 4;
  const posenc::KvScales scales{0.05, 0.02};
  auto check = [&](auto tag) {
    using In = decltype(tag);
    const auto kf = normal(B * N * KVH * D, 4.0f, 7), vf = normal(B * N * KVH * D, 1.0f, 8);
    std::vector<In> k(kf.size()), v(vf.size());
    for (std::size_t i = 0; i < k.size(); ++i) {
      k[i] = In(kf[i]);
      v[i] = In(vf[i]);
    }
    k[3] = In(1000.0);  // saturates E4M3 (448 at k_scale 0.05 is 22.4)
    v[static_cast<std::size_t>(((0 * N + 2) * KVH + 1) * D + 4)] =
        In(std::numeric_limits<double>::quiet_NaN());  // sequence 0, token 2, kv head 1
    std::vector<std::int64_t> pos(B * N);
    for (Eigen::Index i = 0; i < B * N; ++i) pos[static_cast<std::size_t>(i)] = i % N;
    posenc::KvCache<F> cache(B, N, KVH, D);
    cache.set_scales(scales);
    cache.append(ConstTensorView<In, 4>(k.data(), B, N, KVH, D),
                 ConstTensorView<In, 4>(v.data(), B, N, KVH, D),
                 posenc::PositionIdsView(pos.data(), B, N));
    const auto keys = cache.keys();
    const auto values = cache.values();
    int mismatches = 0, nan_codes = 0;
    for (Eigen::Index b = 0; b < B; ++b) {
      for (Eigen::Index t = 0; t < N; ++t) {
        for (Eigen::Index g = 0; g < KVH; ++g) {
          for (Eigen::Index c = 0; c < D; ++c) {
            const auto at = static_cast<std::size_t>(((b * N + t) * KVH + g) * D + c);
            const long double x = static_cast<long double>(static_cast<double>(k[at])) / scales.k;
            const long double y = static_cast<long double>(static_cast<double>(v[at])) / scales.v;
            mismatches += !code_fits(s, x, keys(b, t, g, c).bits);
            if (std::isnan(y)) {
              nan_codes += fp8::spec_is_nan(s, values(b, t, g, c).bits);
            } else {
              mismatches += !code_fits(s, y, values(b, t, g, c).bits);
            }
          }
        }
      }
    }
    CHECK(mismatches == 0);
    CHECK(nan_codes == 1);
    // The last token of each sequence attends to all five: the NaN value reaches element 4 of
    // the heads of kv head 1 in sequence 0 (its weight is not 0), and nothing else.
    const auto q = normal(B * H * D, 1.0f, 9);
    std::vector<float> out(q.size(), 7.0f);
    cache.attend(ConstTensorView<float, 4>(q.data(), B, 1, H, D),
                 TensorView<float, 4>(out.data(), B, 1, H, D));
    for (Eigen::Index b = 0; b < B; ++b) {
      for (Eigen::Index h = 0; h < H; ++h) {
        for (Eigen::Index c = 0; c < D; ++c) {
          const bool want_nan = b == 0 && h / (H / KVH) == 1 && c == 4;
          CHECK(std::isnan(out[static_cast<std::size_t>((b * H + h) * D + c)]) == want_nan);
        }
      }
    }
  };
  SECTION("double") { check(double{}); }
  SECTION("half") { check(Eigen::half{}); }
  SECTION("bfloat16") { check(Eigen::bfloat16{}); }
}

TEST_CASE("paged kv cache fp8: releasing another sequence keeps an E4M3 NaN code in V NaN",
          "[paged_kv_cache][fp8]") {
  // Sequence a holds a NaN code; releasing sequence b (the pool is not empty afterwards) must
  // not make a's NaN code read as a finite value.
  constexpr Eigen::Index N = 12, M = 5, H = 4, KVH = 2, D = 64;
  const auto k = normal(N * KVH * D, 1.0f, 11);
  auto v = normal(N * KVH * D, 1.0f, 12);
  v[7 * KVH * D + 5] = std::numeric_limits<float>::quiet_NaN();  // token 7, kv head 0
  const auto kb = normal(M * KVH * D, 1.0f, 14), vb = normal(M * KVH * D, 1.0f, 15);
  const auto q = normal(H * D, 1.0f, 13);
  posenc::PagedKvCache<posenc::float8_e4m3> pool(8, 4, KVH, D);
  const auto a = pool.add_sequence();
  pool.append(a, ConstTensorView<float, 3>(k.data(), N, KVH, D),
              ConstTensorView<float, 3>(v.data(), N, KVH, D));
  const auto b = pool.add_sequence();
  pool.append(b, ConstTensorView<float, 3>(kb.data(), M, KVH, D),
              ConstTensorView<float, 3>(vb.data(), M, KVH, D));
  pool.release(b);
  std::vector<float> got(H * D);
  pool.attend({a}, ConstTensorView<float, 4>(q.data(), 1, 1, H, D),
              TensorView<float, 4>(got.data(), 1, 1, H, D));
  require_nan_column_only(got, H, D, 2, 5);
}

TEST_CASE("kv_cache fp8: with per-head scales an E4M3 NaN code in a first kv head's V stays NaN",
          "[kv_cache][fp8]") {
  // The NaN is in kv head 0 of token 3, followed by NaN-free rows of the same append: the cache must still read it as NaN, not as a finite code.
  constexpr Eigen::Index N = 12, H = 4, KVH = 2, D = 64;
  const auto k = normal(N * KVH * D, 1.0f, 21);
  auto v = normal(N * KVH * D, 1.0f, 22);
  v[3 * KVH * D + 5] = std::numeric_limits<float>::quiet_NaN();  // token 3, kv head 0
  const auto q = normal(H * D, 1.0f, 23);
  std::vector<std::int64_t> pos(N);
  for (Eigen::Index i = 0; i < N; ++i) pos[static_cast<std::size_t>(i)] = i;
  posenc::KvCache<posenc::float8_e4m3> cache(1, N, KVH, D);
  cache.set_scales(posenc::KvScales::per_head({0.5, 1.0}, {0.25, 2.0}));
  cache.append(ConstTensorView<float, 4>(k.data(), 1, N, KVH, D),
               ConstTensorView<float, 4>(v.data(), 1, N, KVH, D),
               posenc::PositionIdsView(pos.data(), 1, N));
  std::vector<float> got(H * D);
  cache.attend(ConstTensorView<float, 4>(q.data(), 1, 1, H, D),
               TensorView<float, 4>(got.data(), 1, 1, H, D));
  require_nan_column_only(got, H, D, 2, 5);
}
