// Sizes, views and values at the edges of what the API accepts: each case is a contract a
// review found broken (signed overflow in a size or a message, an allocation from unchecked
// extents, null data read as "no ids", a plan or scale that passed its check and then made
// NaN, a cache changed before a throw). Expected: the documented exception naming the value,
// nothing written, and for the accepted edge the value the formula gives.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/attention_paged.hpp>
#include <posenc/attention_varlen.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/paged_kv_cache.hpp>
#include <posenc/relative_bias.hpp>
#include <posenc/rope.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

using Catch::Matchers::Contains;

namespace {

constexpr Eigen::Index kBig32 = Eigen::Index{1} << 32;
constexpr Eigen::Index kInt64Max = std::numeric_limits<Eigen::Index>::max();

posenc::RopeFrequencies small_plan() {
  posenc::RopeParams p;
  p.head_dim = 4;
  return posenc::compute_rope_frequencies(p);
}

}  // namespace

TEST_CASE("limits: cache shapes whose size overflows are refused before any allocation",
          "[limits][kv_cache]") {
  // batch * max_len = 2^64 wrapped to 0: the cache was built with no storage at all.
  REQUIRE_THROWS_WITH((posenc::KvCache<float>(kBig32, kBig32, 1, 1)),
                      Contains("slots of 4294967296 x 4294967296 elements") &&
                          Contains("exceeds the addressable size"));
  REQUIRE_THROWS_AS((posenc::KvCache<float>(1, Eigen::Index{1} << 62, 4, 1)),
                    std::invalid_argument);  // was std::length_error from std::vector
  // (num_pages + 1) * page_size wrapped to 0, and the first append wrote through it.
  REQUIRE_THROWS_WITH((posenc::PagedKvCache<float>(1, Eigen::Index{1} << 62, 2, 1)),
                      Contains("keys of 2 x 4611686018427387904 x 2 x 1 elements"));
  // A cos/sin cache of 2^53 rows of 1024: Eigen's rows * cols wrapped.
  posenc::RopeParams p;
  p.head_dim = 1024;
  REQUIRE_THROWS_WITH(
      posenc::make_rope_cos_sin_cache(posenc::compute_rope_frequencies(p), std::int64_t{1} << 53),
      Contains("cache of 9007199254740992 x 1024 elements"));
}

TEST_CASE("limits: counts near INT64_MAX throw by name instead of overflowing",
          "[limits][kv_cache]") {
  posenc::KvCache<float> cache(1, 4, 1, 2);
  // The message formed first + count before the check ran.
  REQUIRE_THROWS_WITH(cache.erase(1, kInt64Max),
                      Contains("first = 1, count = 9223372036854775807 must lie within"));
  // pages_for(length + n) formed length + n + page_size - 1.
  posenc::PagedKvCache<float> pool(4, 16, 1, 1);
  const auto s = pool.add_sequence();
  float row[2] = {1, 2};
  const Eigen::Index n = kInt64Max - 8;
  REQUIRE_THROWS_AS(pool.append<float>(s, posenc::ConstTensorView<float, 3>(row, n, 1, 1),
                                       posenc::ConstTensorView<float, 3>(row, n, 1, 1)),
                    std::out_of_range);
  CHECK(pool.length(s) == 0);
  CHECK(pool.free_pages() == 4);
}

TEST_CASE("limits: RoPE views whose extents overflow, and null data, are refused",
          "[limits][rope]") {
  const auto f = small_plan();
  posenc::RopeHeads<float> x;
  x.head_dim = 4;
  x.batch = kBig32;
  x.seq = kBig32;
  x.heads = 1;
  // Null data with batch * seq * heads = 2^64 (the emptiness test multiplied them).
  REQUIRE_THROWS_WITH(
      posenc::apply_rope_inplace<float>(x, posenc::RopePositions::contiguous(kBig32, kBig32), f,
                                        posenc::RopeLayout::kHalfSplit),
      Contains("x data is null"));
  // A broadcast view (strides 0) may claim any extents; its token count must fit an Index.
  float buf[4] = {1, 2, 3, 4};
  x.data = buf;
  REQUIRE_THROWS_WITH(
      posenc::apply_rope_inplace<float>(x, posenc::RopePositions::contiguous(kBig32, kBig32), f,
                                        posenc::RopeLayout::kHalfSplit),
      Contains("batch * seq = 4294967296 * 4294967296 tokens"));
  CHECK(buf[0] == 1.0f);
  // Null position ids were read as "no ids", i.e. positions 0, 1, 2.
  REQUIRE_THROWS_WITH(posenc::RopePositions::from_ids(posenc::PositionIdsView(nullptr, 1, 3)),
                      Contains("position_ids data is null"));
  REQUIRE_THROWS_WITH(posenc::RopePositions::contiguous_from(
                          posenc::ConstTensorView<std::int64_t, 1>(nullptr, 1), 3),
                      Contains("starts data is null"));
  CHECK_NOTHROW(posenc::RopePositions::from_ids(posenc::PositionIdsView(nullptr, 0, 3)));
  // A cos/sin cache view over null data was written through.
  REQUIRE_THROWS_WITH(
      posenc::fill_rope_cos_sin_cache<float>(f, posenc::TensorView<float, 2>(nullptr, 2, 4)),
      Contains("cache data is null"));
  // The KV cache read positions through a null view.
  posenc::KvCache<float> cache(1, 4, 1, 4);
  std::vector<float> k(4, 1.0f);
  REQUIRE_THROWS_WITH(cache.append<float>(posenc::ConstTensorView<float, 4>(k.data(), 1, 1, 1, 4),
                                          posenc::ConstTensorView<float, 4>(k.data(), 1, 1, 1, 4),
                                          posenc::PositionIdsView(nullptr, 1, 1)),
                      Contains("positions data is null"));
  CHECK(cache.size() == 0);
}

TEST_CASE(
    "limits: a plan whose values would make NaN is refused by the caches before they "
    "change",
    "[limits][kv_cache][rope]") {
  auto nan_plan = small_plan();
  nan_plan.inv_freq[0] = std::numeric_limits<double>::quiet_NaN();
  float k[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::int64_t pos[4] = {0, 1, 2, 3};
  // set_rope checked the plan's shape only; the rolling cache's next append evicted three
  // slots, then the rotation threw.
  posenc::KvCache<float> rolling(1, 4, 1, 4, /*sliding_window=*/2);
  rolling.append<float>(posenc::ConstTensorView<float, 4>(k, 1, 2, 1, 4),
                        posenc::ConstTensorView<float, 4>(k, 1, 2, 1, 4),
                        posenc::PositionIdsView(pos, 1, 2));
  REQUIRE_THROWS_WITH(rolling.set_rope(nan_plan, posenc::RopeLayout::kHalfSplit),
                      Contains("inv_freq[0] = nan must be finite and >= 0"));
  CHECK_FALSE(rolling.has_rope());
  CHECK(rolling.size() == 2);
  // The paged pool took pages before the throw.
  posenc::PagedKvCache<float> pool(4, 2, 1, 4);
  REQUIRE_THROWS_WITH(pool.set_rope(nan_plan, posenc::RopeLayout::kHalfSplit),
                      Contains("inv_freq[0] = nan"));
  CHECK(pool.free_pages() == 4);
  // An inv_freq whose angle at 2^53 overflows: sin / cos(inf) = NaN from a finite plan.
  auto huge = small_plan();
  huge.inv_freq[1] = 1e300;
  float x[4] = {1, 2, 3, 4};
  const std::int64_t far[1] = {std::int64_t{1} << 40};
  REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(x, 1, 1, 1, 4),
                                                        posenc::PositionIdsView(far, 1, 1), huge,
                                                        posenc::RopeLayout::kHalfSplit),
                      Contains("inv_freq[1] = 1.0000000000000001e+300 must be <= DBL_MAX / 2^53"));
  CHECK(x[0] == 1.0f);
  // The bound itself is accepted: 2^53 times it is DBL_MAX (finite angles).
  auto edge = small_plan();
  edge.inv_freq[1] = std::numeric_limits<double>::max() / 0x1p53;
  CHECK_NOTHROW(posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(x, 1, 1, 1, 4),
                                                  posenc::PositionIdsView(far, 1, 1), edge,
                                                  posenc::RopeLayout::kHalfSplit));
}

TEST_CASE("limits: FP8 scales must be normal floats, the stores divide by them in float",
          "[limits][kv_cache][float8]") {
  // 1e-50 is finite and > 0 but 0 as a float: a zero key was stored as 0 / 0 = NaN.
  posenc::KvCache<posenc::float8_e4m3> cache(1, 4, 1, 4);
  REQUIRE_THROWS_WITH(cache.set_scales(posenc::KvScales(1e-50, 1.0)),
                      Contains("k_scale = 1e-50 must be in [FLT_MIN, FLT_MAX]"));
  REQUIRE_THROWS_WITH(cache.set_scales(posenc::KvScales::per_head({1.0}, {1e39})),
                      Contains("v_heads[0] = 9.9999999999999994e+38 must be in [FLT_MIN"));
  posenc::PagedKvCache<posenc::float8_e5m2> pool(2, 4, 1, 4);
  REQUIRE_THROWS_AS(pool.set_scales(posenc::KvScales(1.0, 1e-50)), std::invalid_argument);
  // FLT_MIN itself is a scale: zeros stay zeros.
  const double smallest = static_cast<double>(std::numeric_limits<float>::min());
  cache.set_scales(posenc::KvScales(smallest, smallest));
  std::vector<float> zeros(4, 0.0f), q(4, 1.0f), out(4, -1.0f);
  const std::int64_t pos[1] = {0};
  cache.append<float>(posenc::ConstTensorView<float, 4>(zeros.data(), 1, 1, 1, 4),
                      posenc::ConstTensorView<float, 4>(zeros.data(), 1, 1, 1, 4),
                      posenc::PositionIdsView(pos, 1, 1));
  cache.attend<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, 1, 1, 4),
                      posenc::TensorView<float, 4>(out.data(), 1, 1, 1, 4));
  for (const float o : out) CHECK(o == 0.0f);
}

TEST_CASE("limits: attention views over no memory or past the address space are refused",
          "[limits][attention]") {
  std::vector<float> buf(16, 0.5f), out(16, -3.0f);
  const auto view4 = [&](Eigen::Index b, Eigen::Index s, Eigen::Index h, Eigen::Index d) {
    return posenc::ConstTensorView<float, 4>(buf.data(), b, s, h, d);
  };
  const posenc::TensorView<float, 4> o(out.data(), 1, 2, 2, 4);
  // Null q with extents: the kernel loaded through it.
  REQUIRE_THROWS_WITH(
      posenc::attention<float>(posenc::ConstTensorView<float, 4>(nullptr, 1, 2, 2, 4),
                               view4(1, 2, 2, 4), view4(1, 2, 2, 4), o),
      Contains("q data is null"));
  // k claiming [1, 2^32, 2^32, 1] over 16 floats: k_len * kv_heads * d overflowed Index.
  REQUIRE_THROWS_WITH(
      posenc::attention<float>(view4(1, 2, 2, 4), view4(1, kBig32, kBig32, 4),
                               view4(1, kBig32, kBig32, 4), o),
      Contains("k shape [1, 4294967296, 4294967296, 4] exceeds the addressable size"));
  // Null metadata: key_lengths was read through null during validation, a null lse meant
  // "no lse" and the log-sum-exps were dropped without a word.
  posenc::AttentionMetadata meta;
  meta.key_lengths = posenc::ConstTensorView<std::int64_t, 1>(nullptr, 1);
  REQUIRE_THROWS_WITH(posenc::attention<float>(view4(1, 2, 2, 4), view4(1, 2, 2, 4),
                                               view4(1, 2, 2, 4), o, {}, meta),
                      Contains("key_lengths data is null"));
  REQUIRE_THROWS_WITH(
      posenc::attention<float>(view4(1, 2, 2, 4), view4(1, 2, 2, 4), view4(1, 2, 2, 4), o,
                               posenc::TensorView<float, 3>(nullptr, 1, 2, 2)),
      Contains("lse data is null"));
  for (const float x : out) REQUIRE(x == -3.0f);
}

TEST_CASE("limits: packed and paged attention size arithmetic does not overflow",
          "[limits][attention]") {
  std::vector<float> buf(16, 0.5f);
  std::vector<float> out(16, -3.0f);
  // Varlen: q_len 2^32 makes q_len^2 = 2^64 tree-mask entries; the sum wrapped to 1 and a
  // one-byte mask passed its length check.
  const Eigen::Index total = kBig32 + 1;
  const posenc::ConstTensorView<float, 3> q(buf.data(), total, 1, 1);
  const posenc::TensorView<float, 3> o(out.data(), total, 1, 1);
  const std::vector<std::int64_t> cu = {0, kBig32, total};
  const posenc::ConstTensorView<std::int64_t, 1> cuv(cu.data(), 3);
  const std::vector<std::uint8_t> one_byte = {1};
  posenc::VarlenMetadata vm;
  vm.tree_masks = posenc::ConstTensorView<std::uint8_t, 1>(one_byte.data(), 1);
  REQUIRE_THROWS_WITH(posenc::attention_varlen<float>(q, q, q, o, cuv, cuv, {}, vm),
                      Contains("tree_masks: sequence 0's 4294967296 queries need"));
  // Paged: seq_lens 2^62 with pages of 2^60 tokens: len + page_size - 1 overflowed, the page
  // bound came out negative and no page id was checked (id 7 of a 1-page pool reached the
  // kernel).
  const posenc::ConstTensorView<float, 4> pages(buf.data(), 1, Eigen::Index{1} << 60, 1, 1);
  const std::vector<std::int32_t> table = {0, 0, 0, 7, 0, 0, 0, 0};
  const std::vector<std::int64_t> lens = {std::int64_t{1} << 62};
  REQUIRE_THROWS_WITH(posenc::attention_paged<float>(
                          posenc::ConstTensorView<float, 4>(buf.data(), 1, 1, 1, 1), pages, pages,
                          posenc::ConstTensorView<std::int32_t, 2>(table.data(), 1, 8),
                          posenc::ConstTensorView<std::int64_t, 1>(lens.data(), 1),
                          posenc::TensorView<float, 4>(out.data(), 1, 1, 1, 1)),
                      Contains("page_table[0, 3] = 7 must be in [0, num_pages = 1)"));
  // A relative bias built for 2^43 heads of 2^20 buckets: num_buckets * heads overflowed.
  posenc::RelativePositionBias r;
  r.num_buckets = Eigen::Index{1} << 20;
  r.max_distance = Eigen::Index{1} << 20;
  r.bidirectional = false;
  r.heads = Eigen::Index{1} << 43;
  posenc::AttentionParams p;
  p.relative_bias = r;
  REQUIRE_THROWS_WITH(
      posenc::attention<float>(
          posenc::ConstTensorView<float, 4>(buf.data(), 1, 1, Eigen::Index{1} << 43, 1),
          posenc::ConstTensorView<float, 4>(buf.data(), 1, 1, 1, 1),
          posenc::ConstTensorView<float, 4>(buf.data(), 1, 1, 1, 1),
          posenc::TensorView<float, 4>(out.data(), 1, 1, Eigen::Index{1} << 43, 1), p),
      Contains("relative_bias.table has 0 entries; it must have num_buckets * heads = 1048576 * "
               "8796093022208"));
  for (const float x : out) REQUIRE(x == -3.0f);
}

TEST_CASE("limits: a cache whose element count fits but whose bytes do not is refused",
          "[limits][kv_cache]") {
  // 2^30 x 2^15 x 2^16 = 2^61 floats: the count is below PTRDIFF_MAX = 2^63 - 1, the 2^63
  // bytes are not (error.hpp: the limit is PTRDIFF_MAX bytes, not elements).
  REQUIRE_THROWS_MATCHES(
      (posenc::KvCache<float>(1, Eigen::Index{1} << 30, Eigen::Index{1} << 15,
                              Eigen::Index{1} << 16)),
      std::invalid_argument,
      Catch::Matchers::Message("posenc::KvCache: keys of 1 x 1073741824 x 32768 x 65536 elements "
                               "of 4 bytes exceeds the addressable size (PTRDIFF_MAX bytes)"));
}

TEST_CASE("limits: batch * seq of exactly INT64_MAX / seq tokens still counts as an Index",
          "[limits][rope]") {
  // The token-count check refuses batch * seq > INT64_MAX only: batch = floor(INT64_MAX / seq)
  // fits. A negative offset then stops the call by name before any token is visited.
  const auto f = small_plan();
  float buf[4] = {1, 2, 3, 4};
  posenc::RopeHeads<float> x;
  x.data = buf;
  x.head_dim = 4;
  x.heads = 1;
  x.seq = kBig32;
  x.batch = kInt64Max / kBig32;  // 2^31 - 1: batch * seq = 2^63 - 2^32
  REQUIRE_THROWS_WITH(
      posenc::apply_rope_inplace<float>(
          x, posenc::RopePositions::from_ids(posenc::PositionIdsView(nullptr, 0, 0), -1), f,
          posenc::RopeLayout::kHalfSplit),
      Contains("position_ids shape [0, 0] must equal the tensors' [batch, seq]"));
  posenc::RopePositions pos = posenc::RopePositions::contiguous(x.batch, x.seq);
  pos.offset = -1;
  REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(x, pos, f, posenc::RopeLayout::kHalfSplit),
                      Contains("position offset = -1 must be in [0, 2^53]"));
  x.batch += 1;  // 2^63: one past
  REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(x, pos, f, posenc::RopeLayout::kHalfSplit),
                      Contains("more than an Index counts"));
  CHECK(buf[0] == 1.0f);
}
