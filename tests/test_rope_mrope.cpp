// M-RoPE (Qwen2-VL contiguous sections, Qwen3-VL interleaved sections) against HF's algorithm
// transcribed literally in long double: per-stream cos/sin tables cat(freqs, freqs), the
// section split / interleave of transformers' apply_multimodal_rotary_pos_emb and
// apply_interleaved_mrope, then q * cos + rotate_half(q) * sin.

#include <catch2/catch.hpp>

#include <posenc/kv_cache.hpp>
#include <posenc/mrope.hpp>
#include <posenc/reference/rope.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "support/check.hpp"
#include "support/kv_prefill.hpp"
#include "support/rng.hpp"

namespace {

using Catch::Matchers::Contains;

/// HF: emb[k][j] for stream k over head_dim = cat(freqs, freqs), then the section merge.
std::vector<long double> hf_merged_angles(const std::vector<long double>& inv, const std::int64_t p[3],
                                          const std::array<Eigen::Index, 4>& section, bool interleaved) {
  const auto half = static_cast<Eigen::Index>(inv.size());
  std::vector<std::vector<long double>> freqs(3, std::vector<long double>(static_cast<std::size_t>(half)));
  for (int k = 0; k < 3; ++k)
    for (Eigen::Index j = 0; j < half; ++j) freqs[k][static_cast<std::size_t>(j)] = static_cast<long double>(p[k]) * inv[static_cast<std::size_t>(j)];
  std::vector<long double> merged(static_cast<std::size_t>(2 * half));
  if (interleaved) {  // apply_interleaved_mrope: freqs_t[..., dim:3*section[dim]:3] = freqs[dim]
    std::vector<long double> t = freqs[0];
    for (int dim = 1; dim <= 2; ++dim)
      for (Eigen::Index idx = dim; idx < 3 * section[static_cast<std::size_t>(dim)]; idx += 3) t[static_cast<std::size_t>(idx)] = freqs[dim][static_cast<std::size_t>(idx)];
    for (Eigen::Index j = 0; j < half; ++j) merged[static_cast<std::size_t>(j)] = merged[static_cast<std::size_t>(half + j)] = t[static_cast<std::size_t>(j)];
  } else {  // cat(freqs, freqs).split(mrope_section * 2), chunk i from stream i % 3
    std::vector<Eigen::Index> chunks = {section[0], section[1], section[2], section[0], section[1], section[2]};
    Eigen::Index start = 0;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      for (Eigen::Index e = start; e < start + chunks[i]; ++e) merged[static_cast<std::size_t>(e)] = freqs[i % 3][static_cast<std::size_t>(e % half)];
      start += chunks[i];
    }
  }
  return merged;
}

template <typename T>
std::vector<long double> hf_mrope_rotate_half(const T* x, Eigen::Index d, const std::vector<long double>& emb) {
  std::vector<long double> y(static_cast<std::size_t>(d));
  const Eigen::Index half = d / 2;
  for (Eigen::Index i = 0; i < d; ++i) {
    const long double xi = static_cast<long double>(posenc::detail::to_double(x[i]));
    const long double rot = i < half ? -static_cast<long double>(posenc::detail::to_double(x[i + half]))
                                     : static_cast<long double>(posenc::detail::to_double(x[i - half]));
    y[static_cast<std::size_t>(i)] = xi * std::cos(emb[static_cast<std::size_t>(i)]) + rot * std::sin(emb[static_cast<std::size_t>(i)]);
  }
  return y;
}

}  // namespace

TEMPLATE_TEST_CASE("mrope: matches HF's Qwen2-VL / Qwen3-VL algorithm", "[rope][mrope]", float, double, Eigen::bfloat16) {
  const Eigen::Index B = 2, S = 21, Hq = 4, Hk = 2, D = 128;
  posenc::RopeParams params;
  params.head_dim = D;
  params.theta = 1000000.0;
  const auto freqs = posenc::compute_rope_frequencies(params);
  const auto inv = posenc::reference::rope_frequencies(params).inv_freq;
  // Image-like grid positions: t constant, h = s / 7, w = s % 7, shifted per batch; plus text.
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * B * S));
  for (Eigen::Index b = 0; b < B; ++b)
    for (Eigen::Index s = 0; s < S; ++s) {
      const bool text = s >= 14;
      pos[static_cast<std::size_t>(0 * B * S + b * S + s)] = text ? 10 + s : 3 + b;
      pos[static_cast<std::size_t>(1 * B * S + b * S + s)] = text ? 10 + s : 3 + b + s / 7;
      pos[static_cast<std::size_t>(2 * B * S + b * S + s)] = text ? 10 + s : 3 + b + s % 7;
    }
  const posenc::MRopePositionsView pview(pos.data(), 3, B, S);
  const double tol = std::is_same_v<TestType, double> ? 1e-13 : (std::is_same_v<TestType, float> ? 2e-6 : 1.6e-2);
  for (const bool interleaved : {false, true}) {
    posenc::MRopeSections sec;
    sec.section = interleaved ? std::array<Eigen::Index, 4>{24, 20, 20} : std::array<Eigen::Index, 4>{16, 24, 24};
    sec.layout = interleaved ? posenc::MRopeSectionLayout::kInterleaved : posenc::MRopeSectionLayout::kContiguous;
    CAPTURE(posenc::to_string(sec.layout));
    const auto q0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * S * Hq * D), 1);
    const auto k0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * S * Hk * D), 2);
    auto q = q0, k = k0;
    posenc::apply_mrope_qk_inplace<TestType>(posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(q.data(), B, S, Hq, D)),
                                             posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(k.data(), B, S, Hk, D)),
                                             pview, freqs, posenc::RopeLayout::kHalfSplit, sec);
    for (Eigen::Index b = 0; b < B; ++b)
      for (Eigen::Index s = 0; s < S; ++s) {
        const std::int64_t p[3] = {pos[static_cast<std::size_t>(b * S + s)], pos[static_cast<std::size_t>(B * S + b * S + s)],
                                   pos[static_cast<std::size_t>(2 * B * S + b * S + s)]};
        const auto emb = hf_merged_angles(inv, p, sec.section, interleaved);
        for (Eigen::Index h = 0; h < Hq + Hk; ++h) {
          const bool is_q = h < Hq;
          const Eigen::Index row = is_q ? ((b * S + s) * Hq + h) * D : ((b * S + s) * Hk + (h - Hq)) * D;
          const auto expect = hf_mrope_rotate_half((is_q ? q0 : k0).data() + row, D, emb);
          const auto& got = is_q ? q : k;
          for (Eigen::Index i = 0; i < D; ++i) {
            CAPTURE(b, s, h, i);
            REQUIRE_THAT(posenc::detail::to_double(got[static_cast<std::size_t>(row + i)]),
                         Catch::Matchers::WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(i)]), tol));
          }
        }
      }
  }
}

TEST_CASE("mrope: text tokens (t = h = w) are plain RoPE, and the inverse undoes it", "[rope][mrope]") {
  const Eigen::Index S = 50, H = 3, D = 64;
  posenc::RopeParams params;
  params.head_dim = D;
  // Also under a YaRN plan (vLLM's MRotaryEmbedding with yarn scaling): its frequencies and
  // cos/sin multiplier 0.1 ln 4 + 1 reach M-RoPE as they reach 1-D RoPE.
  const bool yarn = GENERATE(false, true);
  CAPTURE(yarn);
  if (yarn) {
    params.scaling.type = posenc::RopeScalingType::kYarn;
    params.scaling.factor = 4.0;
    params.scaling.original_max_position_embeddings = 32;
  }
  const auto freqs = posenc::compute_rope_frequencies(params);
  if (yarn) REQUIRE(freqs.attention_factor > 1.1);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * S));
  for (Eigen::Index s = 0; s < S; ++s) pos[static_cast<std::size_t>(s)] = pos[static_cast<std::size_t>(S + s)] = pos[static_cast<std::size_t>(2 * S + s)] = 7 + s;
  const auto x0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * D), 3);
  for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
    auto x = x0, y = x0;
    posenc::MRopeSections sec;
    sec.section = {8, 12, 12};
    const auto hx = posenc::rope_heads<float>(posenc::TensorView<float, 4>(x.data(), 1, S, H, D));
    posenc::apply_mrope_inplace<float>(hx, posenc::MRopePositionsView(pos.data(), 3, 1, S), freqs, layout, sec);
    posenc::apply_rope_inplace<float>(posenc::rope_heads<float>(posenc::TensorView<float, 4>(y.data(), 1, S, H, D)),
                                      posenc::RopePositions::contiguous(1, S, 7), freqs, layout);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(x.size(), [&](std::size_t i) { return x[i]; }, [&](std::size_t i) { return y[i]; }, 1e-6));
    // Text tokens take 1-D RoPE's angles (exact anchors and the angle-addition step between
    // them), so in double, where an anchor and a step differ in the last bits, the same bits.
    std::vector<double> xd(x0.begin(), x0.end()), yd = xd;
    const auto dheads = [&](std::vector<double>& v) {
      return posenc::rope_heads<double>(posenc::TensorView<double, 4>(v.data(), 1, S, H, D));
    };
    posenc::apply_mrope_inplace<double>(dheads(xd), posenc::MRopePositionsView(pos.data(), 3, 1, S),
                                        freqs, layout, sec);
    posenc::apply_rope_inplace<double>(dheads(yd), posenc::RopePositions::contiguous(1, S, 7),
                                       freqs, layout);
    REQUIRE(xd == yd);
    posenc::RopeApplyOptions inv;
    inv.direction = posenc::RopeDirection::kInverse;
    posenc::apply_mrope_inplace<float>(hx, posenc::MRopePositionsView(pos.data(), 3, 1, S), freqs, layout, sec, inv);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(x.size(), [&](std::size_t i) { return x[i]; }, [&](std::size_t i) { return x0[i]; }, 2e-6));
  }
}

TEST_CASE("mrope: invalid sections and positions throw before writing", "[rope][mrope][errors]") {
  const Eigen::Index S = 4, D = 16;
  posenc::RopeParams params;
  params.head_dim = D;
  const auto freqs = posenc::compute_rope_frequencies(params);
  auto x = posenc_test::random_vector<float>(static_cast<std::size_t>(S * D), 4);
  const auto before = x;
  const auto hx = posenc::rope_heads<float>(posenc::TensorView<float, 4>(x.data(), 1, S, 1, D));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * S), 1);
  posenc::MRopeSections sec;
  sec.section = {2, 3, 2};  // sums to 7, rotary_dim / 2 = 8
  REQUIRE_THROWS_MATCHES(posenc::apply_mrope_inplace<float>(hx, posenc::MRopePositionsView(pos.data(), 3, 1, S), freqs, posenc::RopeLayout::kHalfSplit, sec),
                         std::invalid_argument, Catch::Matchers::Message("posenc::apply_mrope_inplace: mrope_section = [2, 3, 2] must be >= 0 and sum to rotary_dim / 2 = 8"));
  sec.section = {2, 3, 3};
  sec.layout = posenc::MRopeSectionLayout::kInterleaved;  // h pairs 1, 4, 7 fit; w pairs 2, 5, 8 do not
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace<float>(hx, posenc::MRopePositionsView(pos.data(), 3, 1, S), freqs, posenc::RopeLayout::kHalfSplit, sec),
                      Contains("interleaved h / w pairs"));
  // Entries near INT64_MAX wrapped the sum back to rotary_dim / 2 (and the stream map read
  // garbage).
  const Eigen::Index big = std::numeric_limits<Eigen::Index>::max();
  sec.section = {big, big, 10};
  sec.layout = posenc::MRopeSectionLayout::kContiguous;
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace<float>(hx, posenc::MRopePositionsView(pos.data(), 3, 1, S), freqs, posenc::RopeLayout::kHalfSplit, sec),
                      Contains("must be >= 0 and sum to rotary_dim / 2 = 8"));
  sec.section = {2, 3, 3};
  sec.layout = posenc::MRopeSectionLayout::kContiguous;
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace<float>(hx, posenc::MRopePositionsView(pos.data(), 2, 1, S), freqs, posenc::RopeLayout::kHalfSplit, sec),
                      Contains("position_ids shape [2, 1, 4] must be [streams, batch, seq] = [3, 1, 4]"));
  pos[static_cast<std::size_t>(2 * S + 1)] = -5;
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace<float>(hx, posenc::MRopePositionsView(pos.data(), 3, 1, S), freqs, posenc::RopeLayout::kHalfSplit, sec),
                      Contains("position_ids[2, 0, 1] = -5"));
  REQUIRE(std::memcmp(x.data(), before.data(), x.size() * sizeof(float)) == 0);
}

namespace {

/// Stream k of columns [first, first + n) of row b of a [3, batch, seq] buffer.
std::vector<std::int64_t> stream(const std::vector<std::int64_t>& ids, Eigen::Index batch,
                                 Eigen::Index seq, int k, Eigen::Index b, Eigen::Index first,
                                 Eigen::Index n) {
  const auto at = static_cast<std::ptrdiff_t>((k * batch + b) * seq + first);
  return {ids.begin() + at, ids.begin() + at + n};
}

}  // namespace

TEST_CASE("mrope: position ids of a prompt follow HF get_rope_index, and decode continues at "
          "i + delta", "[rope][mrope][positions]") {
  using posenc::MRopeSegment;
  using V = std::vector<std::int64_t>;
  SECTION("text 3 | image 2 x 3 | text 2 (Qwen2-VL; worked by hand from get_rope_index)") {
    std::vector<std::int64_t> ids(3 * 11, -1);
    const auto delta = posenc::mrope_position_ids(
        {MRopeSegment::text(3), MRopeSegment::image(2, 3), MRopeSegment::text(2)},
        posenc::TensorView<std::int64_t, 3>(ids.data(), 3, 1, 11));
    // The image starts where the text left off (3); the text after it at max(3, 4, 5) + 1 = 6.
    REQUIRE(stream(ids, 1, 11, 0, 0, 0, 11) == V{0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7});
    REQUIRE(stream(ids, 1, 11, 1, 0, 0, 11) == V{0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7});
    REQUIRE(stream(ids, 1, 11, 2, 0, 0, 11) == V{0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7});
    REQUIRE(delta == 8 - 11);
  }
  SECTION("text 1 | a tall image 3 x 2 | text 1: the next segment starts past the largest h") {
    // get_rope_index: next start = max over all streams + 1 = 1 + (3 - 1) + 1 = 4 (h reaches 3,
    // w only 2): t = 1 1 1 1 1 1, h = 1 1 2 2 3 3, w = 1 2 1 2 1 2.
    std::vector<std::int64_t> ids(3 * 8, -1);
    const auto delta = posenc::mrope_position_ids(
        {MRopeSegment::text(1), MRopeSegment::image(3, 2), MRopeSegment::text(1)},
        posenc::TensorView<std::int64_t, 3>(ids.data(), 3, 1, 8));
    REQUIRE(stream(ids, 1, 8, 0, 0, 0, 8) == V{0, 1, 1, 1, 1, 1, 1, 4});
    REQUIRE(stream(ids, 1, 8, 1, 0, 0, 8) == V{0, 1, 1, 2, 2, 3, 3, 4});
    REQUIRE(stream(ids, 1, 8, 2, 0, 0, 8) == V{0, 1, 2, 1, 2, 1, 2, 4});
    REQUIRE(delta == 5 - 8);
  }
  SECTION("Qwen2.5-VL video: temporal steps scaled by seconds_per_grid_t * tokens_per_second") {
    // text 1 | video 2 x 2 x 2 at 1 s per grid step, 2 tokens per second | text 1:
    // temporal offsets 0 and 2; the last text at max(1 + 2, 1 + 1) + 1 = 4.
    std::vector<std::int64_t> ids(3 * 10, -1);
    const auto delta = posenc::mrope_position_ids(
        {MRopeSegment::text(1), MRopeSegment::video(2, 2, 2, 1.0f, 2.0f), MRopeSegment::text(1)},
        posenc::TensorView<std::int64_t, 3>(ids.data(), 3, 1, 10));
    REQUIRE(stream(ids, 1, 10, 0, 0, 0, 10) == V{0, 1, 1, 1, 1, 3, 3, 3, 3, 4});
    REQUIRE(stream(ids, 1, 10, 1, 0, 0, 10) == V{0, 1, 1, 2, 2, 1, 1, 2, 2, 4});
    REQUIRE(stream(ids, 1, 10, 2, 0, 0, 10) == V{0, 1, 2, 1, 2, 1, 2, 1, 2, 4});
    REQUIRE(delta == 5 - 10);
  }
  SECTION("temporal offsets truncate HF's float32 product") {
    // 0.5 s per step: trunc(0, 0.5, 1.0, 1.5) = 0, 0, 1, 1. 0.7f * 10 in float32 rounds to
    // exactly 7 (in double it is 6.99999988, which would truncate to 6).
    std::vector<std::int64_t> ids(3 * 8, -1);
    const auto delta = posenc::mrope_position_ids(
        {MRopeSegment::text(2), MRopeSegment::video(4, 1, 1, 0.5f, 1.0f),
         MRopeSegment::video(2, 1, 1, 0.7f, 10.0f)},
        posenc::TensorView<std::int64_t, 3>(ids.data(), 3, 1, 8));
    // Second video starts at 2 + 1 + 1 = 4: temporal 4 + 0, 4 + 7; h = w = 4.
    REQUIRE(stream(ids, 1, 8, 0, 0, 0, 8) == V{0, 1, 2, 2, 3, 3, 4, 11});
    REQUIRE(stream(ids, 1, 8, 1, 0, 0, 8) == V{0, 1, 2, 2, 2, 2, 4, 4});
    REQUIRE(delta == 12 - 8);
  }
  SECTION("decode and appended text continue at i + delta; left padding is not touched") {
    // Row 1 of a left-padded batch: 2 padding columns (HF writes 1 there), then the prompt.
    const std::vector<MRopeSegment> prompt = {MRopeSegment::text(2), MRopeSegment::video(3, 2, 2),
                                              MRopeSegment::text(1)};
    constexpr Eigen::Index n = 2 + 12 + 1, seq = n + 2;
    std::vector<std::int64_t> ids(3 * 2 * seq, 1);
    const auto delta = posenc::mrope_position_ids(
        prompt, posenc::TensorView<std::int64_t, 3>(ids.data(), 3, 2, seq), 1, 2);
    for (int k = 0; k < 3; ++k) {
      REQUIRE(stream(ids, 2, seq, k, 0, 0, seq) == V(seq, 1));  // row 0 untouched
      REQUIRE(stream(ids, 2, seq, k, 1, 0, 2) == V{1, 1});      // the padding too
    }
    // The prompt followed by 4 more text tokens: those are decode tokens n .. n + 3.
    auto longer = prompt;
    longer.push_back(MRopeSegment::text(4));
    std::vector<std::int64_t> more(3 * (n + 4));
    const auto delta2 = posenc::mrope_position_ids(
        longer, posenc::TensorView<std::int64_t, 3>(more.data(), 3, 1, n + 4));
    REQUIRE(delta2 == delta);
    for (int k = 0; k < 3; ++k) {
      REQUIRE(stream(more, 1, n + 4, k, 0, 0, n) == stream(ids, 2, seq, k, 1, 2, n));
      for (Eigen::Index i = n; i < n + 4; ++i) {
        REQUIRE(more[static_cast<std::size_t>(k * (n + 4) + i)] == i + delta);
      }
    }
  }
}

TEST_CASE("mrope: bad position-id segments and outputs throw before writing",
          "[rope][mrope][positions][errors]") {
  using posenc::MRopeSegment;
  std::vector<std::int64_t> ids(3 * 2 * 8, -5);
  const auto before = ids;
  const posenc::TensorView<std::int64_t, 3> out(ids.data(), 3, 2, 8);
  auto mixed = MRopeSegment::image(2, 2);
  mixed.text_tokens = 3;
  auto partial = MRopeSegment::image(2, 2);
  partial.grid_t = 0;
  const std::vector<std::pair<std::vector<MRopeSegment>, const char*>> bad = {
      {{MRopeSegment::text(2), mixed}, "segments[1]: a vision segment"},
      {{partial}, "segments[0]: a vision segment"},
      {{MRopeSegment::text(-1)}, "segments[0].text_tokens = -1"},
      {{MRopeSegment::video(2, 1, 1, -1.0f, 1.0f)}, "seconds_per_grid_t = -1"},
      {{MRopeSegment::video(2, 1, 1, 1.0f, std::nanf(""))}, "must be finite"},
      {{MRopeSegment::text(4), MRopeSegment::video(1, 1, 1, 1.0f, 1.0f), MRopeSegment::text(4)},
       "first = 0 + 9 tokens must fit in seq = 8"},
      {{MRopeSegment::text(std::int64_t{1} << 54)}, "past 2^53"},
      {{MRopeSegment::video(3, 1, 1, 1e10f, 1e10f)}, "past 2^53"},
      // The float32 product HF forms (and posenc writes) is checked, not the exact one:
      // 2 * 1e30 * 1e10 overflows to inf; 2 * FLT_MAX = inf, then inf * 0 = NaN (both were cast
      // to int64, undefined); 16777214 * 536870976 is 2^53 - 128 exactly but 2^53 in float32,
      // so the last position was 126 + 1 + 2^53 (past the limit without a throw).
      {{MRopeSegment::video(3, 1, 1, 1e30f, 1e10f)}, "tokens_per_second = 2 * 1.0000000150474662e+30 * "
                                                     "10000000000 is not finite in float32"},
      {{MRopeSegment::video(3, 1, 1, std::numeric_limits<float>::max(), 0.0f)},
       "is not finite in float32"},
      {{MRopeSegment::text(127), MRopeSegment::video(2, 1, 1, 16777214.0f, 536870976.0f)},
       "past 2^53"},
      // Temporal steps take the positions near 2^53 - 2^28 with few tokens; a tall image of
      // 2^28 x 1 then reaches 2^53 + 3 through its h (w - 1 = 0 alone would stay below).
      {{MRopeSegment::text(1), MRopeSegment::video(2, 1, 1, 0x1p52f, 1.0f),
        MRopeSegment::video(2, 1, 1, 0x1p52f - 0x1p28f, 1.0f),
        MRopeSegment::image(std::int64_t{1} << 28, 1)},
       "segments[0 .. 3] reach position"},
  };
  for (const auto& [segments, message] : bad) {
    CAPTURE(message);
    REQUIRE_THROWS_AS(posenc::mrope_position_ids(segments, out), std::invalid_argument);
    REQUIRE_THROWS_WITH(posenc::mrope_position_ids(segments, out), Contains(message));
    REQUIRE(ids == before);
  }
  REQUIRE_THROWS_WITH(posenc::mrope_position_ids({MRopeSegment::text(2)}, out, 2),
                      Contains("b = 2 must be in [0, batch = 2)"));
  REQUIRE_THROWS_WITH(posenc::mrope_position_ids({MRopeSegment::text(2)}, out, 0, 7),
                      Contains("first = 7 + 2 tokens must fit in seq = 8"));
  REQUIRE_THROWS_WITH(posenc::mrope_position_ids(
                          {MRopeSegment::text(2)},
                          posenc::TensorView<std::int64_t, 3>(ids.data(), 2, 3, 8)),
                      Contains("must be [3, batch, seq]"));
  REQUIRE(ids == before);
}

TEST_CASE("mrope: a Qwen2-VL prompt in the KV cache, then text decode by the cache's 1-D RoPE at "
          "i + delta, equals causal attention over the M-RoPE positions", "[rope][mrope][kv_cache]") {
  // Prompt text 3 | image 2 x 3 | text 2 (delta -3, the worked example above), then 3 decode
  // tokens at indices 11, 12, 13, i.e. positions 8, 9, 10 in all three streams. The cache holds
  // the prompt keys rotated by apply_mrope_qk_inplace (no plan set); the plan is set for decode,
  // so the cache rotates each new key and query at the position it is given, i + delta.
  // Expected: HF's M-RoPE (hf_merged_angles / hf_mrope_rotate_half) of every token and a causal
  // softmax by token index, all in long double.
  const Eigen::Index n = 11, m = 3, N = n + m, Hq = 4, Hk = 2, D = 16;
  posenc::RopeParams params;
  params.head_dim = D;
  params.theta = 10000.0;
  const auto freqs = posenc::compute_rope_frequencies(params);
  const auto inv = posenc::reference::rope_frequencies(params).inv_freq;
  posenc::MRopeSections sec;
  sec.section = {2, 3, 3};

  std::vector<std::int64_t> prompt_pos(static_cast<std::size_t>(3 * n));
  const std::int64_t delta = posenc::mrope_position_ids(
      {posenc::MRopeSegment::text(3), posenc::MRopeSegment::image(2, 3), posenc::MRopeSegment::text(2)},
      posenc::TensorView<std::int64_t, 3>(prompt_pos.data(), 3, 1, n));
  REQUIRE(delta == -3);
  const auto stream_pos = [&](int k, Eigen::Index i) {
    return i < n ? prompt_pos[static_cast<std::size_t>(k * n + i)] : static_cast<std::int64_t>(i) + delta;
  };

  const auto q0 = posenc_test::random_vector<float>(static_cast<std::size_t>(N * Hq * D), 11);
  const auto k0 = posenc_test::random_vector<float>(static_cast<std::size_t>(N * Hk * D), 12);
  const auto v0 = posenc_test::random_vector<float>(static_cast<std::size_t>(N * Hk * D), 13);

  // Long-double reference.
  std::vector<std::vector<long double>> qr(static_cast<std::size_t>(N * Hq)), kr(static_cast<std::size_t>(N * Hk));
  for (Eigen::Index i = 0; i < N; ++i) {
    const std::int64_t p[3] = {stream_pos(0, i), stream_pos(1, i), stream_pos(2, i)};
    const auto emb = hf_merged_angles(inv, p, sec.section, false);
    for (Eigen::Index h = 0; h < Hq; ++h) qr[static_cast<std::size_t>(i * Hq + h)] = hf_mrope_rotate_half(q0.data() + (i * Hq + h) * D, D, emb);
    for (Eigen::Index h = 0; h < Hk; ++h) kr[static_cast<std::size_t>(i * Hk + h)] = hf_mrope_rotate_half(k0.data() + (i * Hk + h) * D, D, emb);
  }
  const long double scale = 1.0L / std::sqrt(static_cast<long double>(D));
  const auto expected = [&](Eigen::Index i, Eigen::Index h, Eigen::Index c) {
    const Eigen::Index g = h / (Hq / Hk);
    std::vector<long double> w(static_cast<std::size_t>(i + 1));
    long double top = -1e300L, sum = 0.0L, out = 0.0L;
    for (Eigen::Index j = 0; j <= i; ++j) {
      long double dot = 0.0L;
      for (Eigen::Index e = 0; e < D; ++e)
        dot += qr[static_cast<std::size_t>(i * Hq + h)][static_cast<std::size_t>(e)] * kr[static_cast<std::size_t>(j * Hk + g)][static_cast<std::size_t>(e)];
      w[static_cast<std::size_t>(j)] = scale * dot;
      top = std::max(top, w[static_cast<std::size_t>(j)]);
    }
    for (Eigen::Index j = 0; j <= i; ++j) {
      const long double e = std::exp(w[static_cast<std::size_t>(j)] - top);
      sum += e;
      out += e * static_cast<long double>(v0[static_cast<std::size_t>((j * Hk + g) * D + c)]);
    }
    return static_cast<double>(out / sum);
  };

  posenc::KvCache<float> cache(1, N, Hk, D);
  // Prefill: the prompt rotated by M-RoPE outside the cache; slots keep their token index.
  std::vector<float> q(q0.begin(), q0.begin() + n * Hq * D), k(k0.begin(), k0.begin() + n * Hk * D);
  posenc::apply_mrope_qk_inplace<float>(posenc::rope_heads<float>(posenc::TensorView<float, 4>(q.data(), 1, n, Hq, D)),
                                        posenc::rope_heads<float>(posenc::TensorView<float, 4>(k.data(), 1, n, Hk, D)),
                                        posenc::MRopePositionsView(prompt_pos.data(), 3, 1, n), freqs,
                                        posenc::RopeLayout::kHalfSplit, sec);
  const auto out = posenc_test::prefill_rotated(cache, q.data(), k.data(), v0.data(), n, Hq, Hk, D);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index h = 0; h < Hq; ++h)
      for (Eigen::Index c = 0; c < D; ++c) {
        CAPTURE(i, h, c);
        REQUIRE_THAT(out[static_cast<std::size_t>((i * Hq + h) * D + c)], Catch::Matchers::WithinAbs(expected(i, h, c), 1e-5));
      }

  // Decode: text tokens are plain RoPE at i + delta, which the cache's own plan applies.
  cache.set_rope(freqs, posenc::RopeLayout::kHalfSplit);
  for (Eigen::Index i = n; i < N; ++i) {
    const std::int64_t at[1] = {i + delta};
    cache.append(posenc::ConstTensorView<float, 4>(k0.data() + i * Hk * D, 1, 1, Hk, D),
                 posenc::ConstTensorView<float, 4>(v0.data() + i * Hk * D, 1, 1, Hk, D), posenc::PositionIdsView(at, 1, 1));
    std::vector<float> step(static_cast<std::size_t>(Hq * D));
    cache.attend(posenc::ConstTensorView<float, 4>(q0.data() + i * Hq * D, 1, 1, Hq, D), posenc::TensorView<float, 4>(step.data(), 1, 1, Hq, D));
    for (Eigen::Index h = 0; h < Hq; ++h)
      for (Eigen::Index c = 0; c < D; ++c) {
        CAPTURE(i, h, c);
        REQUIRE_THAT(step[static_cast<std::size_t>(h * D + c)], Catch::Matchers::WithinAbs(expected(i, h, c), 1e-5));
      }
  }
}

TEMPLATE_TEST_CASE("mrope: from a cos/sin cache equals the angles formed per token, every direction", "[rope][mrope][cache]",
                   float, Eigen::bfloat16) {
  // A YaRN plan (cos/sin multiplier 0.1 ln 4 + 1, folded into the cache rows), a prompt of text,
  // a 3 x 5 image and text, both section layouts and both pair layouts; Q 4 + K 2 heads.
  const Eigen::Index S = 24, Hq = 4, Hk = 2, D = 64;
  posenc::RopeParams params;
  params.head_dim = D;
  params.theta = 1000000.0;
  params.scaling.type = posenc::RopeScalingType::kYarn;
  params.scaling.factor = 4.0;
  params.scaling.original_max_position_embeddings = 16;
  const auto freqs = posenc::compute_rope_frequencies(params);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * S));
  posenc::mrope_position_ids({posenc::MRopeSegment::text(5), posenc::MRopeSegment::image(3, 5), posenc::MRopeSegment::text(4)},
                             posenc::TensorView<std::int64_t, 3>(pos.data(), 3, 1, S));
  const auto cache = posenc::make_rope_cos_sin_cache(freqs, 40);
  const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
  const posenc::MRopePositionsView pview(pos.data(), 3, 1, S);
  const auto q0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * Hq * D), 31);
  const auto k0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * Hk * D), 32);
  // float: the cache rows are float where the on-the-fly angles are double; bf16: one ulp.
  const double tol = std::is_same_v<TestType, float> ? 2e-6 : 1.6e-2;
  for (const bool interleaved : {false, true})
    for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved})
      for (const auto dir : {posenc::RopeDirection::kForward, posenc::RopeDirection::kInverse, posenc::RopeDirection::kTranspose}) {
        posenc::MRopeSections sec;
        sec.section = interleaved ? std::array<Eigen::Index, 4>{12, 10, 10} : std::array<Eigen::Index, 4>{8, 12, 12};
        sec.layout = interleaved ? posenc::MRopeSectionLayout::kInterleaved : posenc::MRopeSectionLayout::kContiguous;
        CAPTURE(interleaved, posenc::to_string(layout), static_cast<int>(dir));
        posenc::RopeApplyOptions options;
        options.direction = dir;
        auto q = q0, k = k0, q_ref = q0, k_ref = k0;
        const auto heads = [&](std::vector<TestType>& v, Eigen::Index h) {
          return posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(v.data(), 1, S, h, D));
        };
        posenc::apply_mrope_qk_inplace_cached<TestType>(heads(q, Hq), heads(k, Hk), pview, cview, layout, sec, 0, options);
        posenc::apply_mrope_qk_inplace<TestType>(heads(q_ref, Hq), heads(k_ref, Hk), pview, freqs, layout, sec, options);
        for (std::size_t i = 0; i < q.size(); ++i) {
          CAPTURE(i);
          REQUIRE_THAT(posenc::detail::to_double(q[i]), Catch::Matchers::WithinAbs(posenc::detail::to_double(q_ref[i]), tol));
        }
        for (std::size_t i = 0; i < k.size(); ++i) {
          CAPTURE(i);
          REQUIRE_THAT(posenc::detail::to_double(k[i]), Catch::Matchers::WithinAbs(posenc::detail::to_double(k_ref[i]), tol));
        }
        if (dir == posenc::RopeDirection::kForward) REQUIRE(q != q0);
      }
}

TEST_CASE("mrope: a cos/sin cache too short or of another width throws before writing", "[rope][mrope][cache][errors]") {
  const Eigen::Index S = 6, D = 16;
  posenc::RopeParams params;
  params.head_dim = D;
  const auto cache = posenc::make_rope_cos_sin_cache(posenc::compute_rope_frequencies(params), 8);
  const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * S), 2);
  pos[static_cast<std::size_t>(2 * S + 4)] = 8;  // w of token 4 past the 8 rows
  auto x = posenc_test::random_vector<float>(static_cast<std::size_t>(S * D), 41);
  const auto x0 = x;
  const auto hx = posenc::rope_heads<float>(posenc::TensorView<float, 4>(x.data(), 1, S, 1, D));
  posenc::MRopeSections sec;
  sec.section = {2, 3, 3};
  REQUIRE_THROWS_MATCHES(posenc::apply_mrope_inplace_cached<float>(hx, posenc::MRopePositionsView(pos.data(), 3, 1, S), cview,
                                                                   posenc::RopeLayout::kHalfSplit, sec),
                         std::out_of_range,
                         Catch::Matchers::Message("posenc::apply_mrope_inplace_cached: position_ids[2, 0, 4] = 8 is outside the "
                                                  "cos/sin cache of max_position = 8 rows"));
  pos[static_cast<std::size_t>(2 * S + 4)] = 7;
  sec.section = {2, 3, 2};
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace_cached<float>(hx, posenc::MRopePositionsView(pos.data(), 3, 1, S), cview,
                                                                posenc::RopeLayout::kHalfSplit, sec),
                      Contains("mrope_section = [2, 3, 2] must be >= 0 and sum to rotary_dim / 2 = 8"));
  // A cache planned for 32-wide heads on 16-wide ones.
  params.head_dim = 32;
  const auto wide = posenc::make_rope_cos_sin_cache(posenc::compute_rope_frequencies(params), 8);
  sec.section = {4, 6, 6};
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace_cached<float>(
                          hx, posenc::MRopePositionsView(pos.data(), 3, 1, S),
                          posenc::ConstTensorView<float, 2>(wide.data(), wide.dimension(0), wide.dimension(1)),
                          posenc::RopeLayout::kHalfSplit, sec),
                      Contains("rotary_dim"));
  REQUIRE(x == x0);
}

TEST_CASE("mrope: from a cos/sin cache on a partial, offset rotary slice", "[rope][mrope][cache]") {
  // rotary_dim 32 at offset 16 of 64-wide heads (a nope-first head, or GLM's partial rotary):
  // the cache is 32 wide, dims outside [16, 48) pass through bit for bit.
  const Eigen::Index S = 12, H = 2, D = 64;
  posenc::RopeParams params;
  params.head_dim = D;
  params.rotary_dim = 32;
  params.rotary_offset = 16;
  const auto freqs = posenc::compute_rope_frequencies(params);
  const auto cache = posenc::make_rope_cos_sin_cache(freqs, 16);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * S));
  posenc::mrope_position_ids({posenc::MRopeSegment::text(2), posenc::MRopeSegment::image(2, 4), posenc::MRopeSegment::text(2)},
                             posenc::TensorView<std::int64_t, 3>(pos.data(), 3, 1, S));
  posenc::MRopeSections sec;
  sec.section = {4, 6, 6};
  const auto x0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * D), 51);
  auto x = x0, y = x0;
  const posenc::MRopePositionsView pview(pos.data(), 3, 1, S);
  posenc::apply_mrope_inplace_cached<float>(posenc::rope_heads<float>(posenc::TensorView<float, 4>(x.data(), 1, S, H, D)), pview,
                                            posenc::ConstTensorView<float, 2>(cache.data(), cache.dimension(0), cache.dimension(1)),
                                            posenc::RopeLayout::kHalfSplit, sec, 16);
  posenc::apply_mrope_inplace<float>(posenc::rope_heads<float>(posenc::TensorView<float, 4>(y.data(), 1, S, H, D)), pview, freqs,
                                     posenc::RopeLayout::kHalfSplit, sec);
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    const auto dim = static_cast<Eigen::Index>(i) % D;
    if (dim < 16 || dim >= 48) {
      REQUIRE(x[i] == x0[i]);
    } else {
      REQUIRE_THAT(x[i], Catch::Matchers::WithinAbs(y[i], 2e-6));
    }
  }
  REQUIRE(x != x0);
}

namespace {

/// HF ERNIE-4.5-VL (Ernie4_5_VLTextRotaryEmbedding + apply_rotary_pos_emb) transcribed in long
/// double for one token: inv_freq over head_dim, "pre-rotated" on the h / w dims
/// (inv3d = cat(inv[:hw][0::2], inv[:hw][1::2]) then inv[hw:]), per-stream angles p[k] * inv3d,
/// the split [h, w, t] taking (h from stream 1, w from stream 2, t from stream 0), stack(h, w)
/// flattened, cat t, repeat_interleave(2), then q * cos + rotate_half_text(q) * sin.
template <typename T>
std::vector<long double> hf_ernie_rotate(const T* x, Eigen::Index d, long double theta,
                                         const std::int64_t p[3], Eigen::Index sh, Eigen::Index sw,
                                         Eigen::Index st) {
  const Eigen::Index half = d / 2, hw = sh + sw;
  std::vector<long double> inv(static_cast<std::size_t>(half)), inv3d(inv.size());
  for (Eigen::Index j = 0; j < half; ++j) inv[static_cast<std::size_t>(j)] = 1.0L / std::pow(theta, static_cast<long double>(2 * j) / d);
  for (Eigen::Index i = 0; i < hw / 2; ++i) {
    inv3d[static_cast<std::size_t>(i)] = inv[static_cast<std::size_t>(2 * i)];
    inv3d[static_cast<std::size_t>(hw / 2 + i)] = inv[static_cast<std::size_t>(2 * i + 1)];
  }
  for (Eigen::Index j = hw; j < half; ++j) inv3d[static_cast<std::size_t>(j)] = inv[static_cast<std::size_t>(j)];
  const auto freq = [&](int stream, Eigen::Index col) { return static_cast<long double>(p[stream]) * inv3d[static_cast<std::size_t>(col)]; };
  std::vector<long double> hwt;
  for (Eigen::Index i = 0; i < sh; ++i) {
    hwt.push_back(freq(1, i));       // freq_h: columns [0, sh) of stream 1
    hwt.push_back(freq(2, sh + i));  // freq_w: columns [sh, sh + sw) of stream 2
  }
  for (Eigen::Index i = 0; i < st; ++i) hwt.push_back(freq(0, hw + i));  // freq_t: stream 0
  std::vector<long double> y(static_cast<std::size_t>(d));
  for (Eigen::Index i = 0; i < half; ++i) {
    const long double a = hwt[static_cast<std::size_t>(i)];
    const long double x1 = static_cast<long double>(posenc::detail::to_double(x[2 * i]));
    const long double x2 = static_cast<long double>(posenc::detail::to_double(x[2 * i + 1]));
    y[static_cast<std::size_t>(2 * i)] = x1 * std::cos(a) - x2 * std::sin(a);
    y[static_cast<std::size_t>(2 * i + 1)] = x2 * std::cos(a) + x1 * std::sin(a);
  }
  return y;
}

}  // namespace

TEMPLATE_TEST_CASE("mrope: matches HF's ERNIE-4.5-VL algorithm (alternating h / w pairs)",
                   "[rope][mrope][ernie]", float, double, Eigen::bfloat16) {
  // ERNIE-4.5-VL-28B-A3B: head_dim 128, rope_theta 500000, mrope_section [h, w, t] = [22, 22, 20].
  const Eigen::Index B = 1, S = 23, H = 3, D = 128;
  posenc::RopeParams params;
  params.head_dim = D;
  params.theta = 500000.0;
  params.layout = posenc::RopeLayout::kInterleaved;
  const auto freqs = posenc::compute_rope_frequencies(params);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * S));
  for (Eigen::Index s = 0; s < S; ++s) {  // an image of 4 x 5 after 3 text tokens
    const bool image = s >= 3;
    const Eigen::Index i = s - 3;
    pos[static_cast<std::size_t>(s)] = image ? 3 : s;
    pos[static_cast<std::size_t>(S + s)] = image ? 3 + i / 5 : s;
    pos[static_cast<std::size_t>(2 * S + s)] = image ? 3 + i % 5 : s;
  }
  posenc::MRopeSections sec;
  sec.section = {20, 22, 22};  // posenc's order (t, h, w)
  sec.layout = posenc::MRopeSectionLayout::kAlternatingHw;
  const auto x0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * S * H * D), 3);
  auto x = x0;
  posenc::apply_mrope_inplace<TestType>(posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(x.data(), B, S, H, D)),
                                        posenc::MRopePositionsView(pos.data(), 3, B, S), freqs,
                                        posenc::RopeLayout::kInterleaved, sec);
  const double tol = std::is_same_v<TestType, double> ? 1e-13 : (std::is_same_v<TestType, float> ? 2e-6 : 1.6e-2);
  for (Eigen::Index s = 0; s < S; ++s) {
    const std::int64_t p[3] = {pos[static_cast<std::size_t>(s)], pos[static_cast<std::size_t>(S + s)],
                               pos[static_cast<std::size_t>(2 * S + s)]};
    for (Eigen::Index h = 0; h < H; ++h) {
      const Eigen::Index row = (s * H + h) * D;
      const auto expect = hf_ernie_rotate(x0.data() + row, D, 500000.0L, p, 22, 22, 20);
      for (Eigen::Index i = 0; i < D; ++i) {
        CAPTURE(s, h, i);
        REQUIRE_THAT(posenc::detail::to_double(x[static_cast<std::size_t>(row + i)]),
                     Catch::Matchers::WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(i)]), tol));
      }
    }
  }
  // Unequal h and w sections cannot alternate.
  sec.section = {20, 24, 20};
  auto y = x0;
  REQUIRE_THROWS_WITH(posenc::apply_mrope_inplace<TestType>(posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(y.data(), B, S, H, D)),
                                                            posenc::MRopePositionsView(pos.data(), 3, B, S), freqs,
                                                            posenc::RopeLayout::kInterleaved, sec),
                      Contains("as many h as w pairs"));
  REQUIRE(y == x0);
}

TEST_CASE("mrope: section entries, interleave limits and position shapes at their boundaries",
          "[rope][mrope][errors]") {
  const Eigen::Index S = 4;
  const auto plan = [](Eigen::Index d) {
    posenc::RopeParams params;
    params.head_dim = d;
    return posenc::compute_rope_frequencies(params);
  };
  std::vector<float> x = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * S * 16), 5);
  const auto before = x;
  const auto heads = [&](Eigen::Index b, Eigen::Index s, Eigen::Index d) {
    return posenc::rope_heads<float>(posenc::TensorView<float, 4>(x.data(), b, s, 1, d));
  };
  std::vector<std::int64_t> pos(static_cast<std::size_t>(4 * 2 * S), 1);
  using PV = posenc::MRopePositionsView;
  const auto half_split = posenc::RopeLayout::kHalfSplit;
  posenc::MRopeSections sec;
  // A negative entry whose sum still is rotary_dim / 2 = 8.
  sec.section = {-1, 5, 4};
  CHECK_THROWS_AS(posenc::apply_mrope_inplace<float>(heads(1, S, 16), PV(pos.data(), 3, 1, S),
                                                     plan(16), half_split, sec),
                  std::invalid_argument);
  // Positions [3, 1, S + 1] and [3, 2, S] for tokens [1, S].
  sec.section = {2, 3, 3};
  CHECK_THROWS_AS(posenc::apply_mrope_inplace<float>(heads(1, S, 16), PV(pos.data(), 3, 1, S + 1),
                                                     plan(16), half_split, sec),
                  std::invalid_argument);
  CHECK_THROWS_AS(posenc::apply_mrope_inplace<float>(heads(1, S, 16), PV(pos.data(), 3, 2, S),
                                                     plan(16), half_split, sec),
                  std::invalid_argument);
  // A fourth section of one pair makes four streams: three-stream positions are the wrong shape.
  sec.section = {3, 2, 2, 1};
  CHECK_THROWS_WITH(posenc::apply_mrope_inplace<float>(heads(1, S, 16), PV(pos.data(), 3, 1, S),
                                                       plan(16), half_split, sec),
                    Contains("must be [streams, batch, seq] = [4, 1, 4]"));
  // Interleaved: h pairs j = 1, 4, .., 3 s_h - 2 and w pairs 2, 5, .., 3 s_w - 1 must be
  // < rotary_dim / 2. (1, 2, 1) over 4 pairs puts an h pair at 4; (2, 1, 2) over 5 a w pair at 5.
  sec.layout = posenc::MRopeSectionLayout::kInterleaved;
  sec.section = {1, 2, 1};
  CHECK_THROWS_WITH(posenc::apply_mrope_inplace<float>(heads(1, S, 8), PV(pos.data(), 3, 1, S),
                                                       plan(8), half_split, sec),
                    Contains("interleaved h / w pairs"));
  sec.section = {2, 1, 2};
  CHECK_THROWS_WITH(posenc::apply_mrope_inplace<float>(heads(1, S, 10), PV(pos.data(), 3, 1, S),
                                                       plan(10), half_split, sec),
                    Contains("interleaved h / w pairs"));
  REQUIRE(x == before);
  sec.layout = posenc::MRopeSectionLayout::kContiguous;
  sec.section = {3, 2, 2, 1};
  REQUIRE_NOTHROW(posenc::apply_mrope_inplace<float>(heads(1, S, 16), PV(pos.data(), 4, 1, S),
                                                     plan(16), half_split, sec));
}

TEST_CASE("mrope: one stream taking every pair is RoPE of that stream, angles exact up to 2^50",
          "[rope][mrope]") {
  // The file comment: angles are formed per token in double (p w rounded once) and reduced
  // exactly. Reference: that double angle, its cos / sin in long double, HF's rotate_half.
  const Eigen::Index S = 4, D = 16, half = D / 2;
  posenc::RopeParams params;
  params.head_dim = D;
  params.theta = 100.0;
  const auto freqs = posenc::compute_rope_frequencies(params);
  const std::int64_t big = std::int64_t{1} << 40;
  const std::int64_t ps[S] = {0, 7, big + 3, 1024 * big + 1};
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * S), 1);  // other streams at 1
    for (Eigen::Index s = 0; s < S; ++s) pos[static_cast<std::size_t>(k * S + s)] = ps[s];
    posenc::MRopeSections sec;
    sec.section = {0, 0, 0};
    sec.section[static_cast<std::size_t>(k)] = half;  // one entry of rotary_dim / 2
    const auto x0 = posenc_test::random_vector<double>(static_cast<std::size_t>(S * D), 6);
    auto x = x0;
    posenc::apply_mrope_inplace<double>(
        posenc::rope_heads<double>(posenc::TensorView<double, 4>(x.data(), 1, S, 1, D)),
        posenc::MRopePositionsView(pos.data(), 3, 1, S), freqs, posenc::RopeLayout::kHalfSplit,
        sec);
    for (Eigen::Index s = 0; s < S; ++s) {
      const std::int64_t p[3] = {pos[static_cast<std::size_t>(s)],
                                 pos[static_cast<std::size_t>(S + s)],
                                 pos[static_cast<std::size_t>(2 * S + s)]};
      std::vector<long double> emb(static_cast<std::size_t>(D));
      for (Eigen::Index j = 0; j < half; ++j) {
        const double a = static_cast<double>(p[k]) * freqs.inv_freq[static_cast<std::size_t>(j)];
        emb[static_cast<std::size_t>(j)] = emb[static_cast<std::size_t>(half + j)] = a;
      }
      const auto y = hf_mrope_rotate_half(x0.data() + s * D, D, emb);
      for (Eigen::Index i = 0; i < D; ++i)
        CHECK(std::abs(x[static_cast<std::size_t>(s * D + i)] -
                       static_cast<double>(y[static_cast<std::size_t>(i)])) < 1e-9);
    }
  }
}

TEST_CASE("mrope: a double cos/sin cache turns forward and inverse as HF's angles",
          "[rope][mrope][cache]") {
  const Eigen::Index S = 9, D = 16, half = D / 2, P = 8;
  posenc::RopeParams params;
  params.head_dim = D;
  const auto freqs = posenc::compute_rope_frequencies(params);
  const std::vector<long double> inv(freqs.inv_freq.begin(), freqs.inv_freq.end());
  // Row p = cat(cos(p w), sin(p w)), in long double, stored double.
  std::vector<double> cache(static_cast<std::size_t>(P * D));
  for (Eigen::Index p = 0; p < P; ++p)
    for (Eigen::Index j = 0; j < half; ++j) {
      const long double a = static_cast<long double>(p) * inv[static_cast<std::size_t>(j)];
      cache[static_cast<std::size_t>(p * D + j)] = static_cast<double>(std::cos(a));
      cache[static_cast<std::size_t>(p * D + half + j)] = static_cast<double>(std::sin(a));
    }
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * S));
  posenc::mrope_position_ids({posenc::MRopeSegment::text(2), posenc::MRopeSegment::image(2, 3),
                              posenc::MRopeSegment::text(1)},
                             posenc::TensorView<std::int64_t, 3>(pos.data(), 3, 1, S));
  posenc::MRopeSections sec;
  sec.section = {2, 3, 3};
  const auto x0 = posenc_test::random_vector<double>(static_cast<std::size_t>(S * D), 7);
  for (const auto dir : {posenc::RopeDirection::kForward, posenc::RopeDirection::kInverse}) {
    CAPTURE(static_cast<int>(dir));
    auto x = x0;
    posenc::RopeApplyOptions options;
    options.direction = dir;
    posenc::apply_mrope_inplace_cached<double>(
        posenc::rope_heads<double>(posenc::TensorView<double, 4>(x.data(), 1, S, 1, D)),
        posenc::MRopePositionsView(pos.data(), 3, 1, S),
        posenc::ConstTensorView<double, 2>(cache.data(), P, D), posenc::RopeLayout::kHalfSplit,
        sec, 0, options);
    for (Eigen::Index s = 0; s < S; ++s) {
      const std::int64_t p[3] = {pos[static_cast<std::size_t>(s)],
                                 pos[static_cast<std::size_t>(S + s)],
                                 pos[static_cast<std::size_t>(2 * S + s)]};
      auto emb = hf_merged_angles(inv, p, sec.section, false);
      if (dir == posenc::RopeDirection::kInverse)
        for (auto& a : emb) a = -a;  // the inverse of a rotation by a is the rotation by -a
      const auto y = hf_mrope_rotate_half(x0.data() + s * D, D, emb);
      for (Eigen::Index i = 0; i < D; ++i)
        CHECK(std::abs(x[static_cast<std::size_t>(s * D + i)] -
                       static_cast<double>(y[static_cast<std::size_t>(i)])) < 1e-12);
    }
  }
}

TEST_CASE("mrope: position 2^53 is in range, 2^53 + 1 is not", "[rope][mrope][errors]") {
  const Eigen::Index S = 2, D = 16;
  posenc::RopeParams params;
  params.head_dim = D;
  const auto freqs = posenc::compute_rope_frequencies(params);
  auto x = posenc_test::random_vector<double>(static_cast<std::size_t>(S * D), 8);
  const auto hx = posenc::rope_heads<double>(posenc::TensorView<double, 4>(x.data(), 1, S, 1, D));
  posenc::MRopeSections sec;
  sec.section = {2, 3, 3};
  const std::int64_t top = std::int64_t{1} << 53;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * S), top);
  const posenc::MRopePositionsView pv(pos.data(), 3, 1, S);
  const auto half_split = posenc::RopeLayout::kHalfSplit;
  REQUIRE_NOTHROW(posenc::apply_mrope_inplace<double>(hx, pv, freqs, half_split, sec));
  for (const double v : x) CHECK(std::isfinite(v));
  pos[1] = top + 1;
  CHECK_THROWS_AS(posenc::apply_mrope_inplace<double>(hx, pv, freqs, half_split, sec),
                  std::invalid_argument);
}

TEST_CASE("mrope: position ids of empty text, a zero time scale and the 2^53 bound",
          "[rope][mrope][positions]") {
  using posenc::MRopeSegment;
  using V = std::vector<std::int64_t>;
  using Out = posenc::TensorView<std::int64_t, 3>;
  // get_rope_index: an empty text run adds nothing. text 2 | image 2 x 2 | text 1:
  // t = 0 1 2 2 2 2 4, h = 0 1 2 2 3 3 4, w = 0 1 2 3 2 3 4, delta = 5 - 7.
  std::vector<std::int64_t> ids(3 * 7, -1);
  auto delta = posenc::mrope_position_ids({MRopeSegment::text(2), MRopeSegment::text(0),
                                           MRopeSegment::image(2, 2), MRopeSegment::text(0),
                                           MRopeSegment::text(1)},
                                          Out(ids.data(), 3, 1, 7));
  CHECK(stream(ids, 1, 7, 0, 0, 0, 7) == V{0, 1, 2, 2, 2, 2, 4});
  CHECK(stream(ids, 1, 7, 1, 0, 0, 7) == V{0, 1, 2, 2, 3, 3, 4});
  CHECK(stream(ids, 1, 7, 2, 0, 0, 7) == V{0, 1, 2, 3, 2, 3, 4});
  CHECK(delta == 5 - 7);
  // Qwen2.5-VL: second_per_grid_t = 0 puts every frame at time 0 (t * 0 * 2 = 0): text 1 |
  // video 3 x 1 x 2 | text 1: t = 0 1 1 1 1 1 1 3, next text at 1 + max(0, 0, 1) + 1 = 3.
  ids.assign(3 * 8, -1);
  delta = posenc::mrope_position_ids({MRopeSegment::text(1),
                                      MRopeSegment::video(3, 1, 2, 0.0f, 2.0f),
                                      MRopeSegment::text(1)},
                                     Out(ids.data(), 3, 1, 8));
  CHECK(stream(ids, 1, 8, 0, 0, 0, 8) == V{0, 1, 1, 1, 1, 1, 1, 3});
  CHECK(stream(ids, 1, 8, 1, 0, 0, 8) == V{0, 1, 1, 1, 1, 1, 1, 3});
  CHECK(stream(ids, 1, 8, 2, 0, 0, 8) == V{0, 1, 2, 1, 2, 1, 2, 3});
  CHECK(delta == 4 - 8);
  // A negative first column, nothing written.
  ids.assign(3 * 8, -1);
  using posenc::mrope_position_ids;
  CHECK_THROWS_AS(mrope_position_ids({MRopeSegment::text(2)}, Out(ids.data(), 3, 1, 8), 0, -1),
                  std::invalid_argument);
  for (const auto v : ids) REQUIRE(v == -1);
  // Positions up to 2^53 are allowed: text 2^29 - 1 | video 2 x 1 x 1 with (1 s) * 2^53 - 2^29
  // (exact in float32) reaches 2^29 - 1 + 2^53 - 2^29 + 1 = 2^53 exactly. That only fails for
  // the output's size; three more text tokens put the last frame at 2^53 + 2, past 2^53
  // (one more would end at 2^53 itself, which apply accepts). A 2^27 x 2^27 image stays at
  // position 2^27 but has 2^54 tokens, past 2^53 too.
  const auto t29 = (Eigen::Index{1} << 29) - 1;
  const float last = static_cast<float>((std::int64_t{1} << 53) - (std::int64_t{1} << 29));
  REQUIRE(static_cast<double>(last) == 9007198717870080.0);
  CHECK_THROWS_WITH(mrope_position_ids({MRopeSegment::text(t29),
                                        MRopeSegment::video(2, 1, 1, last)},
                                       Out(ids.data(), 3, 1, 8)),
                    Contains("must fit in seq = 8"));
  CHECK_THROWS_WITH(mrope_position_ids({MRopeSegment::text(t29 + 3),
                                        MRopeSegment::video(2, 1, 1, last)},
                                       Out(ids.data(), 3, 1, 8)),
                    Contains("past 2^53"));
  const Eigen::Index g = Eigen::Index{1} << 27;
  CHECK_THROWS_WITH(mrope_position_ids({MRopeSegment::image(g, g)}, Out(ids.data(), 3, 1, 8)),
                    Contains("past 2^53"));
  for (const auto v : ids) REQUIRE(v == -1);
}

TEST_CASE("mrope: a negative rotary_offset with a cos/sin cache throws before writing",
          "[rope][mrope][cache][errors]") {
  const Eigen::Index S = 2, D = 16;
  posenc::RopeParams params;
  params.head_dim = D;
  const auto cache = posenc::make_rope_cos_sin_cache(posenc::compute_rope_frequencies(params), 4);
  // The heads sit 8 floats into the buffer: an offset of -2 would reach before them.
  std::vector<float> buf(static_cast<std::size_t>(8 + S * D), 3.0f);
  const auto hx =
      posenc::rope_heads<float>(posenc::TensorView<float, 4>(buf.data() + 8, 1, S, 1, D));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * S), 1);
  posenc::MRopeSections sec;
  sec.section = {2, 3, 3};
  CHECK_THROWS_WITH(posenc::apply_mrope_inplace_cached<float>(
                        hx, posenc::MRopePositionsView(pos.data(), 3, 1, S), cache,
                        posenc::RopeLayout::kHalfSplit, sec, -2),
                    Contains("rotary_offset = -2 must be >= 0"));
  for (const float v : buf) REQUIRE(v == 3.0f);
}
