// XD-RoPE (HunYuan-VL / HunyuanOCR: four position streams p, w, h, i over contiguous
// sections, on Hunyuan's NTK-alpha base). Expected values: Tencent's reference algorithm
// transcribed in long double — per-stream tables cat(freqs, freqs) with inv_freq from
// base = theta * alpha^(d / (d - 2)), the chunks of `xdrope_section * 2` (list repetition)
// taking stream i % 4, then q * cos + rotate_half(q) * sin — and the position rule of its
// get_xdrope_input_positions / transformers' get_rope_index worked by hand.

#include <catch2/catch.hpp>

#include <posenc/kv_cache.hpp>
#include <posenc/mrope.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "support/check.hpp"
#include "support/kv_prefill.hpp"
#include "support/rng.hpp"

namespace {

using Catch::Matchers::Contains;

constexpr Eigen::Index kD = 32;  // head_dim = rotary_dim; 16 pairs
constexpr double kTheta = 10000.0, kAlpha = 1000.0;

posenc::RopeFrequencies hunyuan_freqs() {
  posenc::RopeParams params;
  params.head_dim = kD;
  params.theta = kTheta;
  params.scaling.type = posenc::RopeScalingType::kNtk;  // Hunyuan's alpha: a fixed NTK base
  params.scaling.factor = kAlpha;
  return posenc::compute_rope_frequencies(params);
}

/// inv_freq[j] = 1 / (theta alpha^(d/(d-2)))^(2j/d) (transformers HunYuanVLRotaryEmbedding).
std::vector<long double> hunyuan_inv_freq() {
  const long double d = kD;
  const long double base = static_cast<long double>(kTheta) * std::pow(static_cast<long double>(kAlpha), d / (d - 2));
  std::vector<long double> inv(static_cast<std::size_t>(kD / 2));
  for (std::size_t j = 0; j < inv.size(); ++j) inv[j] = 1.0L / std::pow(base, 2.0L * static_cast<long double>(j) / d);
  return inv;
}

/// Tencent's get_batch_xdrope for one token: emb_k = cat(p_k inv, p_k inv) per stream, split
/// by `section * 2` (list repetition: 2 x 4 chunks), chunk i from stream i % 4.
std::vector<long double> xd_angles(const std::vector<long double>& inv, const std::array<std::int64_t, 4>& p,
                                   const std::array<Eigen::Index, 4>& section) {
  const auto half = inv.size();
  std::vector<long double> merged;
  std::size_t start = 0;
  for (int i = 0; i < 8; ++i) {
    const auto len = static_cast<std::size_t>(section[static_cast<std::size_t>(i % 4)]);
    for (std::size_t c = start; c < start + len; ++c) {
      merged.push_back(static_cast<long double>(p[static_cast<std::size_t>(i % 4)]) * inv[c % half]);
    }
    start += len;
  }
  return merged;
}

/// q * cos(emb) + rotate_half(q) * sin(emb), rotate_half(q) = cat(-q2, q1).
std::vector<long double> rotate_half_apply(const std::vector<long double>& x, const std::vector<long double>& emb) {
  const std::size_t n = x.size(), half = n / 2;
  std::vector<long double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const long double rot = i < half ? -x[i + half] : x[i - half];
    out[i] = x[i] * std::cos(emb[i]) + rot * std::sin(emb[i]);
  }
  return out;
}

template <typename T>
posenc::RopeHeads<T> heads(std::vector<T>& v, Eigen::Index batch, Eigen::Index seq, Eigen::Index h) {
  return posenc::rope_heads<T>(posenc::TensorView<T, 4>(v.data(), batch, seq, h, kD));
}

}  // namespace

TEST_CASE("xdrope: position ids follow HunYuan-VL's rule, worked by hand", "[rope][mrope][xdrope]") {
  // text 2 | 1 token before the grid | grid 2 rows x (2 + newline) | image_end | text 1 |
  // grid 1 x 2 | text 1 (the grid starts where `first` says; the layout is the caller's)
  const Eigen::Index n = 14;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(4 * n), -7);
  const std::int64_t delta = posenc::xdrope_position_ids({{3, 2, 3}, {11, 1, 2}}, n,
                                                         posenc::TensorView<std::int64_t, 3>(pos.data(), 4, 1, n));
  const std::vector<std::int64_t> p = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  const std::vector<std::int64_t> w = {0, 1, 2, 0, 1, 2, 0, 1, 2, 9, 10, 0, 1, 13};
  const std::vector<std::int64_t> h = {0, 1, 2, 0, 0, 0, 1, 1, 1, 9, 10, 0, 0, 13};
  const std::vector<std::int64_t> i = {0, 1, 2, 0, 0, 0, 0, 0, 0, 9, 10, 1, 1, 13};
  CHECK(std::vector<std::int64_t>(pos.begin(), pos.begin() + n) == p);
  CHECK(std::vector<std::int64_t>(pos.begin() + n, pos.begin() + 2 * n) == w);
  CHECK(std::vector<std::int64_t>(pos.begin() + 2 * n, pos.begin() + 3 * n) == h);
  CHECK(std::vector<std::int64_t>(pos.begin() + 3 * n, pos.end()) == i);
  CHECK(delta == 0);  // the p stream keeps the token index: decode continues at i

  // Three streams (w, h, i): no p; a prompt ending in its image has a negative delta
  // (transformers: max + 1 - n = 2 + 1 - 8).
  const Eigen::Index n3 = 8;
  std::vector<std::int64_t> pos3(static_cast<std::size_t>(3 * n3), -7);
  CHECK(posenc::xdrope_position_ids({{2, 2, 3}}, n3, posenc::TensorView<std::int64_t, 3>(pos3.data(), 3, 1, n3)) == -5);
  CHECK(pos3 == std::vector<std::int64_t>{0, 1, 0, 1, 2, 0, 1, 2,  //
                                          0, 1, 0, 0, 0, 1, 1, 1,  //
                                          0, 1, 0, 0, 0, 0, 0, 0});

  // Left padding: sequence 1 of 2 starts at column 2; its first two columns stay untouched,
  // and sequence 0 too. Image ordinals restart per sequence (transformers counts across the
  // batch; Tencent's code per sample).
  const Eigen::Index seq = 6;
  std::vector<std::int64_t> padded(static_cast<std::size_t>(4 * 2 * seq), -7);
  const posenc::TensorView<std::int64_t, 3> pv(padded.data(), 4, 2, seq);
  posenc::xdrope_position_ids({{1, 1, 2}}, 4, pv, 1, 2);
  for (Eigen::Index st = 0; st < 4; ++st) {
    for (Eigen::Index s = 0; s < seq; ++s) {
      CAPTURE(st, s);
      CHECK(pv(st, 0, s) == -7);
      if (s < 2) CHECK(pv(st, 1, s) == -7);
    }
  }
  CHECK(pv(0, 1, 2) == 0);
  CHECK(pv(0, 1, 5) == 3);
  CHECK(pv(1, 1, 4) == 1);  // w of the image's second token
  CHECK(pv(3, 1, 3) == 0);  // image 0 of this sequence
}

TEST_CASE("xdrope: bad images and shapes throw before writing", "[rope][mrope][xdrope][errors]") {
  const Eigen::Index n = 10;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(4 * n), -7);
  const posenc::TensorView<std::int64_t, 3> out(pos.data(), 4, 1, n);
  const auto untouched = [&] {
    for (const auto v : pos) REQUIRE(v == -7);
  };
  REQUIRE_THROWS_AS(posenc::xdrope_position_ids({{2, 0, 3}}, n, out), std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc::xdrope_position_ids({{2, 0, 3}}, n, out), Contains("images[0]: rows = 0 and columns = 3 must be >= 1"));
  REQUIRE_THROWS_WITH(posenc::xdrope_position_ids({{1, 2, 2}, {4, 1, 2}}, n, out),
                      Contains("images[1].first = 4 must be >= 5 (images ascending and disjoint)"));
  REQUIRE_THROWS_WITH(posenc::xdrope_position_ids({{5, 2, 3}}, n, out), Contains("images[0]: 2 x 3 tokens from 5 must end by n = 10"));
  REQUIRE_THROWS_WITH(posenc::xdrope_position_ids({}, n + 1, out), Contains("first = 0 + n = 11 tokens must fit in seq = 10"));
  REQUIRE_THROWS_WITH(posenc::xdrope_position_ids({}, n, out, 1), Contains("b = 1 must be in [0, batch = 1)"));
  REQUIRE_THROWS_WITH(posenc::xdrope_position_ids({}, 5, posenc::TensorView<std::int64_t, 3>(pos.data(), 2, 2, n)),
                      Contains("out shape [2, 2, 10] must be [3 or 4, batch, seq]"));
  untouched();
  // Exactly filling n is fine, and so are images back to back from token 0 (the second's
  // tokens take image index 1 in the last stream).
  REQUIRE_NOTHROW(posenc::xdrope_position_ids({{4, 2, 3}}, n, out));
  REQUIRE_NOTHROW(posenc::xdrope_position_ids({{0, 1, 2}, {2, 1, 2}}, 4, out));
  CHECK(out(3, 0, 1) == 0);
  CHECK(out(3, 0, 2) == 1);
  CHECK(out(3, 0, 3) == 1);
}

TEMPLATE_TEST_CASE("xdrope: apply matches Tencent's get_batch_xdrope in long double", "[rope][mrope][xdrope]", float, double,
                   Eigen::bfloat16) {
  const Eigen::Index B = 2, S = 15, Hq = 4, Hk = 2;
  const auto freqs = hunyuan_freqs();
  const auto inv = hunyuan_inv_freq();
  for (std::size_t j = 0; j < inv.size(); ++j) REQUIRE_THAT(freqs.inv_freq[j], Catch::Matchers::WithinRel(static_cast<double>(inv[j]), 1e-14));
  // Two prompts: text, an image of 2 x 4 (3 + newline), text; the second sequence's image
  // starts later and is its second (i = 1).
  std::vector<std::int64_t> pos(static_cast<std::size_t>(4 * B * S));
  const posenc::TensorView<std::int64_t, 3> pv(pos.data(), 4, B, S);
  posenc::xdrope_position_ids({{3, 2, 4}}, S, pv, 0);
  posenc::xdrope_position_ids({{1, 1, 2}, {5, 2, 4}}, S, pv, 1);
  const double tol = std::is_same_v<TestType, double> ? 1e-13 : (std::is_same_v<TestType, float> ? 2e-6 : 1.6e-2);
  for (const auto& section : {std::array<Eigen::Index, 4>{4, 4, 4, 4}, std::array<Eigen::Index, 4>{2, 6, 5, 3}}) {
    CAPTURE(section[0], section[1], section[2], section[3]);
    const posenc::MRopeSections sec{section, posenc::MRopeSectionLayout::kContiguous};
    REQUIRE(sec.streams() == 4);
    const auto q0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * S * Hq * kD), 41);
    const auto k0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * S * Hk * kD), 42);
    auto q = q0, k = k0;
    posenc::apply_mrope_qk_inplace<TestType>(heads(q, B, S, Hq), heads(k, B, S, Hk), posenc::MRopePositionsView(pos.data(), 4, B, S),
                                             freqs, posenc::RopeLayout::kHalfSplit, sec);
    bool image_differs_from_text = false;
    for (Eigen::Index b = 0; b < B; ++b)
      for (Eigen::Index s = 0; s < S; ++s) {
        const std::array<std::int64_t, 4> p = {pv(0, b, s), pv(1, b, s), pv(2, b, s), pv(3, b, s)};
        image_differs_from_text = image_differs_from_text || p[1] != p[0];
        const auto emb = xd_angles(inv, p, section);
        for (Eigen::Index hh = 0; hh < Hq + Hk; ++hh) {
          const bool is_q = hh < Hq;
          const Eigen::Index row = is_q ? ((b * S + s) * Hq + hh) * kD : ((b * S + s) * Hk + (hh - Hq)) * kD;
          std::vector<long double> x(static_cast<std::size_t>(kD));
          for (Eigen::Index d = 0; d < kD; ++d) x[static_cast<std::size_t>(d)] = posenc::detail::to_double((is_q ? q0 : k0)[static_cast<std::size_t>(row + d)]);
          const auto expect = rotate_half_apply(x, emb);
          const auto& got = is_q ? q : k;
          for (Eigen::Index d = 0; d < kD; ++d) {
            CAPTURE(b, s, hh, d);
            REQUIRE_THAT(posenc::detail::to_double(got[static_cast<std::size_t>(row + d)]),
                         Catch::Matchers::WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(d)]), tol));
          }
        }
      }
    REQUIRE(image_differs_from_text);
  }
}

TEST_CASE("xdrope: interleaved pairs, the cos/sin cache path and text tokens agree with plain RoPE", "[rope][mrope][xdrope][cache]") {
  const Eigen::Index S = 12, H = 3;
  const auto freqs = hunyuan_freqs();
  const auto inv = hunyuan_inv_freq();
  const posenc::MRopeSections sec{{3, 5, 5, 3}, posenc::MRopeSectionLayout::kContiguous};
  std::vector<std::int64_t> pos(static_cast<std::size_t>(4 * S));
  const posenc::TensorView<std::int64_t, 3> pv(pos.data(), 4, 1, S);
  posenc::xdrope_position_ids({{2, 2, 4}}, S, pv);
  const posenc::MRopePositionsView pview(pos.data(), 4, 1, S);
  const auto x0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * kD), 43);

  // Interleaved pairs (2j, 2j + 1): pair j turns by p[stream(j)] inv[j], stream(j) from the
  // contiguous sections 3 / 5 / 5 / 3.
  auto x = x0;
  posenc::apply_mrope_inplace<float>(heads(x, 1, S, H), pview, freqs, posenc::RopeLayout::kInterleaved, sec);
  for (Eigen::Index s = 0; s < S; ++s)
    for (Eigen::Index h = 0; h < H; ++h)
      for (Eigen::Index j = 0; j < kD / 2; ++j) {
        const int stream = j < 3 ? 0 : j < 8 ? 1 : j < 13 ? 2 : 3;
        const long double a = static_cast<long double>(pv(stream, 0, s)) * inv[static_cast<std::size_t>(j)];
        const std::size_t r = static_cast<std::size_t>((s * H + h) * kD + 2 * j);
        const long double x1 = x0[r], x2 = x0[r + 1];
        CAPTURE(s, h, j);
        REQUIRE_THAT(x[r], Catch::Matchers::WithinAbs(static_cast<double>(x1 * std::cos(a) - x2 * std::sin(a)), 2e-6));
        REQUIRE_THAT(x[r + 1], Catch::Matchers::WithinAbs(static_cast<double>(x2 * std::cos(a) + x1 * std::sin(a)), 2e-6));
      }

  // The cos/sin cache path (vLLM's XDRotaryEmbedding gathers rows per stream) and the inverse.
  const auto cache = posenc::make_rope_cos_sin_cache(freqs, S);
  const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
  for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
    auto a = x0, b = x0;
    posenc::apply_mrope_inplace<float>(heads(a, 1, S, H), pview, freqs, layout, sec);
    posenc::apply_mrope_inplace_cached<float>(heads(b, 1, S, H), pview, cview, layout, sec);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(a.size(), [&](std::size_t i) { return a[i]; }, [&](std::size_t i) { return b[i]; }, 2e-6));
    posenc::RopeApplyOptions inverse;
    inverse.direction = posenc::RopeDirection::kInverse;
    posenc::apply_mrope_inplace_cached<float>(heads(b, 1, S, H), pview, cview, layout, sec, 0, inverse);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(b.size(), [&](std::size_t i) { return b[i]; }, [&](std::size_t i) { return x0[i]; }, 2e-6));
  }
  // Tokens whose streams agree in part are no text tokens (the cache path reads one row in
  // place only when all four agree): the first three equal but not the fourth, and pairs
  // (p, w) and (h, i) equal to each other but not across, as (1, 1, 0, 0).
  std::vector<std::int64_t> odd(static_cast<std::size_t>(4 * S));
  for (const int pattern : {0, 1}) {
    CAPTURE(pattern);
    for (Eigen::Index s = 0; s < S; ++s) {
      const std::int64_t other = (s * 5) % S;
      for (Eigen::Index st = 0; st < 4; ++st) {
        const bool first_part = pattern == 0 ? st < 3 : st < 2;
        odd[static_cast<std::size_t>(st * S + s)] = first_part ? s : other;
      }
    }
    auto a = x0, b = x0;
    const posenc::MRopePositionsView oview(odd.data(), 4, 1, S);
    posenc::apply_mrope_inplace<float>(heads(a, 1, S, H), oview, freqs, posenc::RopeLayout::kHalfSplit, sec);
    posenc::apply_mrope_inplace_cached<float>(heads(b, 1, S, H), oview, cview, posenc::RopeLayout::kHalfSplit, sec);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(a.size(), [&](std::size_t i) { return a[i]; }, [&](std::size_t i) { return b[i]; }, 2e-6));
  }

  // Text tokens: all four streams equal, so XD-RoPE is plain RoPE at the token index.
  std::vector<std::int64_t> text(static_cast<std::size_t>(4 * S));
  posenc::xdrope_position_ids({}, S, posenc::TensorView<std::int64_t, 3>(text.data(), 4, 1, S));
  auto t1 = x0, t2 = x0;
  posenc::apply_mrope_inplace<float>(heads(t1, 1, S, H), posenc::MRopePositionsView(text.data(), 4, 1, S), freqs,
                                     posenc::RopeLayout::kHalfSplit, sec);
  posenc::apply_rope_inplace<float>(heads(t2, 1, S, H), posenc::RopePositions::contiguous(1, S, 0), freqs, posenc::RopeLayout::kHalfSplit);
  POSENC_REQUIRE_CLOSE(posenc_test::compare(t1.size(), [&](std::size_t i) { return t1[i]; }, [&](std::size_t i) { return t2[i]; }, 1e-6));
}

TEST_CASE("xdrope: q . k depends only on each stream's position difference", "[rope][mrope][xdrope]") {
  // A rotation per pair: shifting all four streams of both tokens by per-stream amounts
  // leaves <R(p) q, R(p') k> unchanged.
  const auto freqs = hunyuan_freqs();
  const posenc::MRopeSections sec{{4, 4, 4, 4}, posenc::MRopeSectionLayout::kContiguous};
  const auto q0 = posenc_test::random_vector<double>(kD, 44);
  const auto k0 = posenc_test::random_vector<double>(kD, 45);
  const auto dot_at = [&](const std::array<std::int64_t, 4>& pq, const std::array<std::int64_t, 4>& pk) {
    auto q = q0, k = k0;
    std::vector<std::int64_t> a(pq.begin(), pq.end()), b(pk.begin(), pk.end());
    posenc::apply_mrope_inplace<double>(posenc::rope_heads<double>(posenc::TensorView<double, 4>(q.data(), 1, 1, 1, kD)),
                                        posenc::MRopePositionsView(a.data(), 4, 1, 1), freqs, posenc::RopeLayout::kHalfSplit, sec);
    posenc::apply_mrope_inplace<double>(posenc::rope_heads<double>(posenc::TensorView<double, 4>(k.data(), 1, 1, 1, kD)),
                                        posenc::MRopePositionsView(b.data(), 4, 1, 1), freqs, posenc::RopeLayout::kHalfSplit, sec);
    double dot = 0.0;
    for (Eigen::Index d = 0; d < kD; ++d) dot += q[static_cast<std::size_t>(d)] * k[static_cast<std::size_t>(d)];
    return dot;
  };
  const double base = dot_at({20, 3, 1, 0}, {17, 0, 2, 0});
  CHECK_THAT(dot_at({120, 13, 41, 5}, {117, 10, 42, 5}), Catch::Matchers::WithinAbs(base, 1e-12));
  CHECK_THAT(dot_at({1020, 3, 1, 9}, {1017, 0, 2, 9}), Catch::Matchers::WithinAbs(base, 1e-12));
  // Changing one stream's difference changes it (the w stream: 3 -> 4).
  CHECK(std::abs(dot_at({20, 4, 1, 0}, {17, 0, 2, 0}) - base) > 1e-3);
}

TEST_CASE("xdrope: four sections need four position streams and the contiguous layout", "[rope][mrope][xdrope][errors]") {
  const Eigen::Index S = 4, H = 1;
  const auto freqs = hunyuan_freqs();
  std::vector<std::int64_t> pos(static_cast<std::size_t>(4 * S), 1);
  auto x0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * kD), 46);
  auto x = x0;
  posenc::MRopeSections sec{{4, 4, 4, 4}, posenc::MRopeSectionLayout::kContiguous};
  REQUIRE_THROWS_AS(posenc::apply_mrope_inplace<float>(heads(x, 1, S, H), posenc::MRopePositionsView(pos.data(), 3, 1, S), freqs,
                                                       posenc::RopeLayout::kHalfSplit, sec),
                    std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace<float>(heads(x, 1, S, H), posenc::MRopePositionsView(pos.data(), 3, 1, S), freqs,
                                                         posenc::RopeLayout::kHalfSplit, sec),
                      Contains("position_ids shape [3, 1, 4] must be [streams, batch, seq] = [4, 1, 4] (4 streams: mrope_section has four entries)"));
  sec.layout = posenc::MRopeSectionLayout::kInterleaved;
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace<float>(heads(x, 1, S, H), posenc::MRopePositionsView(pos.data(), 4, 1, S), freqs,
                                                         posenc::RopeLayout::kHalfSplit, sec),
                      Contains("mrope_section = [4, 4, 4, 4]: four streams need the contiguous layout, not interleaved"));
  sec = {{4, 4, 4, 5}, posenc::MRopeSectionLayout::kContiguous};
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace<float>(heads(x, 1, S, H), posenc::MRopePositionsView(pos.data(), 4, 1, S), freqs,
                                                         posenc::RopeLayout::kHalfSplit, sec),
                      Contains("mrope_section = [4, 4, 4, 5] must be >= 0 and sum to rotary_dim / 2 = 16"));
  sec = {{4, 4, 8, 0}, posenc::MRopeSectionLayout::kContiguous};  // three streams given four rows
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace<float>(heads(x, 1, S, H), posenc::MRopePositionsView(pos.data(), 4, 1, S), freqs,
                                                         posenc::RopeLayout::kHalfSplit, sec),
                      Contains("must be [streams, batch, seq] = [3, 1, 4] (3 streams: t, h, w)"));
  pos[static_cast<std::size_t>(3 * S + 2)] = -1;  // the i stream
  sec = {{4, 4, 4, 4}, posenc::MRopeSectionLayout::kContiguous};
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace<float>(heads(x, 1, S, H), posenc::MRopePositionsView(pos.data(), 4, 1, S), freqs,
                                                         posenc::RopeLayout::kHalfSplit, sec),
                      Contains("position_ids[3, 0, 2] = -1 must be in [0, 2^53]"));
  REQUIRE(x == x0);
}

TEST_CASE("xdrope: a HunYuan-VL prompt in the KV cache, then decode by the cache's 1-D RoPE at i, "
          "equals causal attention over the four streams", "[rope][mrope][xdrope][kv_cache]") {
  // Prompt: text 2 | 1 token | grid 2 x (3 + newline) | image_end (12 tokens), then 3 decode
  // tokens at 12, 13, 14 in every stream (delta 0). The prompt's Q / K are turned by XD-RoPE
  // outside the cache (no plan set); the plan is set for decode. Expected: Tencent's XD-RoPE
  // of every token and a causal softmax by token index, in long double.
  const Eigen::Index n = 12, m = 3, N = n + m, Hq = 4, Hk = 2, D = kD;
  const auto freqs = hunyuan_freqs();
  const auto inv = hunyuan_inv_freq();
  const posenc::MRopeSections sec{{4, 4, 4, 4}, posenc::MRopeSectionLayout::kContiguous};
  std::vector<std::int64_t> prompt_pos(static_cast<std::size_t>(4 * n));
  REQUIRE(posenc::xdrope_position_ids({{3, 2, 4}}, n, posenc::TensorView<std::int64_t, 3>(prompt_pos.data(), 4, 1, n)) == 0);
  const auto stream_pos = [&](std::size_t k, Eigen::Index i) {
    return i < n ? prompt_pos[k * static_cast<std::size_t>(n) + static_cast<std::size_t>(i)] : static_cast<std::int64_t>(i);
  };
  const auto q0 = posenc_test::random_vector<float>(static_cast<std::size_t>(N * Hq * D), 51);
  const auto k0 = posenc_test::random_vector<float>(static_cast<std::size_t>(N * Hk * D), 52);
  const auto v0 = posenc_test::random_vector<float>(static_cast<std::size_t>(N * Hk * D), 53);

  const auto rotated = [&](const std::vector<float>& x, Eigen::Index i, Eigen::Index heads, Eigen::Index h) {
    const auto emb = xd_angles(inv, {stream_pos(0, i), stream_pos(1, i), stream_pos(2, i), stream_pos(3, i)}, sec.section);
    std::vector<long double> row(static_cast<std::size_t>(D));
    for (Eigen::Index e = 0; e < D; ++e) row[static_cast<std::size_t>(e)] = x[static_cast<std::size_t>((i * heads + h) * D + e)];
    return rotate_half_apply(row, emb);
  };
  const long double scale = 1.0L / std::sqrt(static_cast<long double>(D));
  const auto expected = [&](Eigen::Index i, Eigen::Index h) {
    const Eigen::Index g = h / (Hq / Hk);
    const auto qr = rotated(q0, i, Hq, h);
    std::vector<long double> w(static_cast<std::size_t>(i + 1));
    for (Eigen::Index j = 0; j <= i; ++j) {
      const auto kr = rotated(k0, j, Hk, g);
      long double dot = 0.0L;
      for (Eigen::Index e = 0; e < D; ++e) dot += qr[static_cast<std::size_t>(e)] * kr[static_cast<std::size_t>(e)];
      w[static_cast<std::size_t>(j)] = scale * dot;
    }
    const long double top = *std::max_element(w.begin(), w.end());
    long double sum = 0.0L;
    std::vector<long double> out(static_cast<std::size_t>(D), 0.0L);
    for (Eigen::Index j = 0; j <= i; ++j) {
      const long double e = std::exp(w[static_cast<std::size_t>(j)] - top);
      sum += e;
      for (Eigen::Index c = 0; c < D; ++c) out[static_cast<std::size_t>(c)] += e * v0[static_cast<std::size_t>((j * Hk + g) * D + c)];
    }
    for (auto& o : out) o /= sum;
    return out;
  };

  posenc::KvCache<float> cache(1, N, Hk, D);
  std::vector<float> q(q0.begin(), q0.begin() + n * Hq * D), k(k0.begin(), k0.begin() + n * Hk * D);
  posenc::apply_mrope_qk_inplace<float>(heads(q, 1, n, Hq), heads(k, 1, n, Hk), posenc::MRopePositionsView(prompt_pos.data(), 4, 1, n),
                                        freqs, posenc::RopeLayout::kHalfSplit, sec);
  const auto out = posenc_test::prefill_rotated(cache, q.data(), k.data(), v0.data(), n, Hq, Hk, D);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index h = 0; h < Hq; ++h) {
      const auto e = expected(i, h);
      for (Eigen::Index c = 0; c < D; ++c) {
        CAPTURE(i, h, c);
        REQUIRE_THAT(out[static_cast<std::size_t>((i * Hq + h) * D + c)], Catch::Matchers::WithinAbs(static_cast<double>(e[static_cast<std::size_t>(c)]), 1e-5));
      }
    }

  cache.set_rope(freqs, posenc::RopeLayout::kHalfSplit);
  for (Eigen::Index i = n; i < N; ++i) {
    const std::int64_t at[1] = {i};
    cache.append(posenc::ConstTensorView<float, 4>(k0.data() + i * Hk * D, 1, 1, Hk, D),
                 posenc::ConstTensorView<float, 4>(v0.data() + i * Hk * D, 1, 1, Hk, D), posenc::PositionIdsView(at, 1, 1));
    std::vector<float> step(static_cast<std::size_t>(Hq * D));
    cache.attend(posenc::ConstTensorView<float, 4>(q0.data() + i * Hq * D, 1, 1, Hq, D), posenc::TensorView<float, 4>(step.data(), 1, 1, Hq, D));
    for (Eigen::Index h = 0; h < Hq; ++h) {
      const auto e = expected(i, h);
      for (Eigen::Index c = 0; c < D; ++c) {
        CAPTURE(i, h, c);
        REQUIRE_THAT(step[static_cast<std::size_t>(h * D + c)], Catch::Matchers::WithinAbs(static_cast<double>(e[static_cast<std::size_t>(c)]), 1e-5));
      }
    }
  }
}

TEST_CASE("xdrope: five streams, a negative n or a negative first throw before writing",
          "[rope][mrope][xdrope][errors]") {
  const Eigen::Index n = 6;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(5 * n), -7);
  using posenc::xdrope_position_ids;
  const posenc::TensorView<std::int64_t, 3> out5(pos.data(), 5, 1, n);
  CHECK_THROWS_AS(xdrope_position_ids({}, 4, out5), std::invalid_argument);
  const posenc::TensorView<std::int64_t, 3> out(pos.data(), 4, 1, n);
  CHECK_THROWS_AS(xdrope_position_ids({}, -1, out), std::invalid_argument);
  CHECK_THROWS_AS(xdrope_position_ids({}, 2, out, 0, -1), std::invalid_argument);
  for (const auto v : pos) REQUIRE(v == -7);
}

TEST_CASE("xdrope: the delta reads only the written columns, not the left padding",
          "[rope][mrope][xdrope][positions]") {
  // Columns 0, 1 are padding holding 100; tokens 2 .. 6 are text 0, a 1 x 2 image at 1, text 3,
  // 4. Tencent's get_xdrope_input_positions: the largest position is n - 1 = 4, delta 0.
  const Eigen::Index seq = 7, n = 5;
  for (const Eigen::Index streams : {Eigen::Index{3}, Eigen::Index{4}}) {
    CAPTURE(streams);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(streams * seq), 100);
    const posenc::TensorView<std::int64_t, 3> out(pos.data(), streams, 1, seq);
    CHECK(posenc::xdrope_position_ids({{1, 1, 2}}, n, out, 0, 2) == 0);
    CHECK(out(streams - 3, 0, 0) == 100);
  }
}
