// Learned absolute position tables: the seed's worked example, OPT's offset, the hard length
// limit (std::out_of_range, nothing written), views vs owned copies, and extension policies.

#include <catch2/catch.hpp>

#include <posenc/learned.hpp>

#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <vector>

#include "support/rng.hpp"
#include "support/sanitizer.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;

TEST_CASE("learned: the seed's example h_i = e_i + p_i", "[learned][seed]") {
  // Seed 000 §3.1: e0 = [0.2, 0.1], e1 = [0.7, 0.3]; p0 = [0.0, 0.4], p1 = [0.5, 0.1]
  // -> h0 = [0.2, 0.5], h1 = [1.2, 0.4].
  std::vector<double> emb{0.2, 0.1, 0.7, 0.3};
  const std::vector<double> table{0.0, 0.4, 0.5, 0.1};
  const std::vector<std::int64_t> ids{0, 1};
  posenc::add_learned_positions_inplace<double>(posenc::TensorView<double, 3>(emb.data(), 1, 2, 2),
                                                posenc::ConstTensorView<double, 2>(table.data(), 2, 2),
                                                posenc::PositionIdsView(ids.data(), 1, 2));
  CHECK_THAT(emb[0], WithinAbs(0.2, 1e-15));
  CHECK_THAT(emb[1], WithinAbs(0.5, 1e-15));
  CHECK_THAT(emb[2], WithinAbs(1.2, 1e-15));
  CHECK_THAT(emb[3], WithinAbs(0.4, 1e-15));
}

TEMPLATE_TEST_CASE("learned: add and lookup pick row position + offset", "[learned]", float,
                   double, Eigen::half, Eigen::bfloat16) {
  using T = TestType;
  const Eigen::Index max_positions = 10, d = 6, batch = 2, seq = 3;
  std::vector<T> table(static_cast<std::size_t>(max_positions * d));
  for (Eigen::Index r = 0; r < max_positions; ++r)
    for (Eigen::Index k = 0; k < d; ++k)
      table[static_cast<std::size_t>(r * d + k)] = T(static_cast<float>(r) + 0.125f * static_cast<float>(k));
  // OPT-style: the model's position p lives in row p + 2 (rows 0, 1 are padding-era rows).
  const std::vector<std::int64_t> ids{0, 1, 2, 5, 6, 7};
  const std::int64_t offset = 2;
  const posenc::ConstTensorView<T, 2> tv(table.data(), max_positions, d);
  const posenc::PositionIdsView pv(ids.data(), batch, seq);

  std::vector<T> out(static_cast<std::size_t>(batch * seq * d), T(-1.0f));
  posenc::lookup_learned_positions<T>(tv, pv, posenc::TensorView<T, 3>(out.data(), batch, seq, d), offset);
  std::vector<T> emb(out.size(), T(1.0f));
  posenc::add_learned_positions_inplace<T>(posenc::TensorView<T, 3>(emb.data(), batch, seq, d), tv, pv, offset);
  for (std::size_t n = 0; n < ids.size(); ++n) {
    for (Eigen::Index k = 0; k < d; ++k) {
      const double want = static_cast<double>(ids[n] + offset) + 0.125 * static_cast<double>(k);
      const auto idx = n * static_cast<std::size_t>(d) + static_cast<std::size_t>(k);
      CHECK(static_cast<double>(out[idx]) == static_cast<double>(T(static_cast<float>(want))));
      CHECK_THAT(static_cast<double>(emb[idx]), WithinAbs(1.0 + want, 1.0 * (1.0 + want) / 128));
    }
  }
}

TEMPLATE_TEST_CASE("learned: add over rows of whole packets and a remainder is the exact sum",
                   "[learned]", float, double) {
  // d = 19: two or more whole SIMD packets of float / double on every target, then a remainder.
  using T = TestType;
  const Eigen::Index max_positions = 8, d = 19, batch = 2, seq = 3;
  std::vector<T> table(static_cast<std::size_t>(max_positions * d));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = T(0.5) * T(static_cast<int>(i % 13));
  const std::vector<std::int64_t> ids{0, 3, 7, 1, 1, 6};
  std::vector<T> emb(static_cast<std::size_t>(batch * seq * d));
  for (std::size_t i = 0; i < emb.size(); ++i) emb[i] = T(static_cast<int>(i % 7)) - T(3.25);
  const auto before = emb;
  const posenc::ConstTensorView<T, 2> tv(table.data(), max_positions, d);
  posenc::add_learned_positions_inplace<T>(posenc::TensorView<T, 3>(emb.data(), batch, seq, d), tv,
                                           posenc::PositionIdsView(ids.data(), batch, seq));
  for (std::size_t n = 0; n < ids.size(); ++n) {
    for (Eigen::Index k = 0; k < d; ++k) {
      const auto at = n * static_cast<std::size_t>(d) + static_cast<std::size_t>(k);
      const auto row = static_cast<std::size_t>(ids[n] * d + k);
      CAPTURE(n, k);
      CHECK(emb[at] == before[at] + table[row]);  // small multiples of 1/4: exact in T
    }
  }
}

TEST_CASE("learned: a position past the table throws out_of_range and writes nothing",
          "[learned][errors]") {
  const Eigen::Index max_positions = 4, d = 3;
  const std::vector<float> table(static_cast<std::size_t>(max_positions * d), 1.0f);
  std::vector<float> emb(2 * 3 * d, 0.5f);
  const auto before = emb;
  // The offending position is the very last one: everything before it is valid, so a kernel
  // that wrote while validating would have modified emb.
  std::vector<std::int64_t> ids{0, 1, 2, 0, 1, 4};
  const auto add = [&](std::int64_t offset) {
    posenc::add_learned_positions_inplace<float>(posenc::TensorView<float, 3>(emb.data(), 2, 3, d),
                                                 posenc::ConstTensorView<float, 2>(table.data(), max_positions, d),
                                                 posenc::PositionIdsView(ids.data(), 2, 3), offset);
  };
  REQUIRE_THROWS_MATCHES(
      add(0), std::out_of_range,
      Catch::Matchers::Message(
          "posenc::add_learned_positions_inplace: position_ids[1, 2] = 4 (+ position_offset 0) "
          "is outside the learned table of max_positions = 4 rows: valid positions are [0, 4)"));
  CHECK(emb == before);

  // With OPT's offset 2, position 2 is row 4: the first such position is [0, 2].
  ids[5] = 0;
  REQUIRE_THROWS_WITH(add(2), Contains("position_ids[0, 2] = 2") && Contains("[-2, 2)"));
  CHECK(emb == before);

  ids[5] = -1;
  REQUIRE_THROWS_AS(add(0), std::out_of_range);
  CHECK(emb == before);
}

TEST_CASE("learned: shape errors name the parameter", "[learned][errors]") {
  const std::vector<float> table(4 * 3, 1.0f);
  std::vector<float> emb(2 * 3 * 5, 0.5f);
  const auto before = emb;
  const std::vector<std::int64_t> ids{0, 1, 2, 0, 1, 2};
  REQUIRE_THROWS_WITH(
      posenc::add_learned_positions_inplace<float>(posenc::TensorView<float, 3>(emb.data(), 2, 3, 5),
                                                   posenc::ConstTensorView<float, 2>(table.data(), 4, 3),
                                                   posenc::PositionIdsView(ids.data(), 2, 3)),
      Contains("d_model = 5 must equal the table's d_model (3)"));
  REQUIRE_THROWS_WITH(
      posenc::add_learned_positions_inplace<float>(posenc::TensorView<float, 3>(emb.data(), 2, 3, 3),
                                                   posenc::ConstTensorView<float, 2>(table.data(), 4, 3),
                                                   posenc::PositionIdsView(ids.data(), 1, 6)),
      Contains("position_ids shape [1, 6]"));
  REQUIRE_THROWS_AS(
      posenc::add_learned_positions_inplace<float>(posenc::TensorView<float, 3>(emb.data(), 2, 0, 3),
                                                   posenc::ConstTensorView<float, 2>(table.data(), 4, 3),
                                                   posenc::PositionIdsView(ids.data(), 2, 0)),
      std::invalid_argument);
  CHECK(emb == before);
}

TEST_CASE("learned: views alias the caller's weights, copies do not", "[learned][table]") {
  std::vector<float> weights{1, 2, 3, 4, 5, 6};  // [3, 2]
  const auto view = posenc::LearnedPositionTable<float>::view(
      posenc::ConstTensorView<float, 2>(weights.data(), 3, 2));
  const auto copy = posenc::LearnedPositionTable<float>::copy_of(
      posenc::ConstTensorView<float, 2>(weights.data(), 3, 2));
  weights[4] = 50.0f;  // the caller updates row 2 (e.g. reloads a checkpoint)
  const std::vector<std::int64_t> ids{2};
  std::vector<float> a(2), b(2);
  view.lookup(posenc::PositionIdsView(ids.data(), 1, 1), posenc::TensorView<float, 3>(a.data(), 1, 1, 2));
  copy.lookup(posenc::PositionIdsView(ids.data(), 1, 1), posenc::TensorView<float, 3>(b.data(), 1, 1, 2));
  CHECK(a == std::vector<float>{50.0f, 6.0f});
  CHECK(b == std::vector<float>{5.0f, 6.0f});
  CHECK_FALSE(view.owns_storage());
  CHECK(copy.owns_storage());

  // A copied table keeps pointing at its own storage after copy and move.
  auto copy2 = copy;
  auto moved = std::move(copy2);
  moved.lookup(posenc::PositionIdsView(ids.data(), 1, 1), posenc::TensorView<float, 3>(b.data(), 1, 1, 2));
  CHECK(b == std::vector<float>{5.0f, 6.0f});
  CHECK(moved.weights().data() != copy.weights().data());
}

TEST_CASE("learned: extend keeps trained rows and fills new ones by policy", "[learned][extend]") {
  const std::vector<float> weights{1, 2, 3, 4, 5, 6};  // 3 trained rows of d = 2
  const auto table = posenc::LearnedPositionTable<float>::view(
      posenc::ConstTensorView<float, 2>(weights.data(), 3, 2));
  const std::vector<std::int64_t> ids{0, 1, 2, 3, 4, 6};
  const auto rows_of = [&](const posenc::LearnedPositionTable<float>& t) {
    std::vector<float> out(12);
    t.lookup(posenc::PositionIdsView(ids.data(), 1, 6), posenc::TensorView<float, 3>(out.data(), 1, 6, 2));
    return out;
  };
  const auto zeros = table.extend(7, posenc::LearnedExtendInit::kZeros);
  CHECK(zeros.max_positions() == 7);
  CHECK(rows_of(zeros) == std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0});
  CHECK(rows_of(table.extend(7, posenc::LearnedExtendInit::kRepeatLast)) ==
        std::vector<float>{1, 2, 3, 4, 5, 6, 5, 6, 5, 6, 5, 6});
  CHECK(rows_of(table.extend(7, posenc::LearnedExtendInit::kCyclic)) ==
        std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 1, 2});  // rows 3, 4, 6 -> 0, 1, 0
  // The original table's limit is unchanged: position 3 is still out of range there.
  std::vector<float> out(2);
  const std::vector<std::int64_t> three{3};
  REQUIRE_THROWS_AS(table.lookup(posenc::PositionIdsView(three.data(), 1, 1),
                                 posenc::TensorView<float, 3>(out.data(), 1, 1, 2)),
                    std::out_of_range);
  REQUIRE_THROWS_WITH(table.extend(2), Contains("new_max_positions = 2 must be >= the current max_positions (3)"));
  // 2^62 rows of d = 2 floats: Eigen's unchecked rows * d wrapped, the buffer came out small and
  // the row loop wrote past it. The largest size is PTRDIFF_MAX bytes: 2^63 / 4 / 2 rows.
  REQUIRE_THROWS_MATCHES(table.extend(Eigen::Index{1} << 62), std::invalid_argument,
                         Catch::Matchers::Message(
                             "posenc::extend_learned_table: new_max_positions = 4611686018427387904 rows of "
                             "d_model = 2 overflow the addressable size (at most 1152921504606846975 rows)"));
  // An init outside the enum left the new rows uninitialised.
  REQUIRE_THROWS_WITH(table.extend(5, static_cast<posenc::LearnedExtendInit>(7)),
                      Contains("init = 7 is not a LearnedExtendInit"));
}

TEST_CASE("learned: a position_offset past 2^53 is rejected, not negated into overflow",
          "[learned][errors]") {
  const std::vector<float> table(4 * 2, 1.0f);
  std::vector<float> emb(2, 0.5f);
  const std::vector<std::int64_t> ids{0};
  const auto add = [&](std::int64_t offset) {
    posenc::add_learned_positions_inplace<float>(posenc::TensorView<float, 3>(emb.data(), 1, 1, 2),
                                                 posenc::ConstTensorView<float, 2>(table.data(), 4, 2),
                                                 posenc::PositionIdsView(ids.data(), 1, 1), offset);
  };
  // -INT64_MIN and 4 - (INT64_MIN + 1) overflowed in the range check and its message.
  for (const std::int64_t offset : {std::numeric_limits<std::int64_t>::min(),
                                    std::numeric_limits<std::int64_t>::min() + 1,
                                    std::numeric_limits<std::int64_t>::max(),
                                    (std::int64_t{1} << 53) + 1}) {
    CAPTURE(offset);
    REQUIRE_THROWS_AS(add(offset), std::invalid_argument);
    REQUIRE_THROWS_WITH(add(offset), Contains("must be in [-2^53, 2^53]"));
  }
  CHECK(emb == std::vector<float>{0.5f, 0.5f});
  // The limits themselves still reach the position check.
  REQUIRE_THROWS_AS(add(std::int64_t{1} << 53), std::out_of_range);
  REQUIRE_THROWS_AS(add(-(std::int64_t{1} << 53)), std::out_of_range);
  add(0);
  CHECK(emb == std::vector<float>{1.5f, 1.5f});
}

TEST_CASE("learned: LearnedPositionTable add_inplace and lookup apply position_offset",
          "[learned][table]") {
  // Row r of the table is [10 r, 10 r + 1]; with OPT's offset 2 positions 0, 1 read rows 2, 3.
  const std::vector<float> weights{0, 1, 10, 11, 20, 21, 30, 31, 40, 41};  // [5, 2]
  const auto table = posenc::LearnedPositionTable<float>::view(
      posenc::ConstTensorView<float, 2>(weights.data(), 5, 2));
  const std::vector<std::int64_t> ids{0, 1};
  const posenc::PositionIdsView pv(ids.data(), 1, 2);
  std::vector<float> out(4, -1.0f);
  table.lookup(pv, posenc::TensorView<float, 3>(out.data(), 1, 2, 2), 2);
  CHECK(out == std::vector<float>{20, 21, 30, 31});
  std::vector<float> emb(4, 0.5f);
  table.add_inplace(posenc::TensorView<float, 3>(emb.data(), 1, 2, 2), pv, 2);
  CHECK(emb == std::vector<float>{20.5f, 21.5f, 30.5f, 31.5f});
}

TEST_CASE("learned: copy assignment takes the other table's rows and storage",
          "[learned][table]") {
  const std::vector<float> small{1, 2, 3, 4};  // [2, 2]
  std::vector<float> big{7, 8, 9, 10, 11, 12};  // [3, 2]
  auto a = posenc::LearnedPositionTable<float>::view(
      posenc::ConstTensorView<float, 2>(small.data(), 2, 2));
  {
    const auto b = posenc::LearnedPositionTable<float>::copy_of(
        posenc::ConstTensorView<float, 2>(big.data(), 3, 2));
    a = b;
    CHECK(a.weights().data() != b.weights().data());  // a copy of b's storage, not an alias
  }  // b is gone: a must not point into it
  big[4] = 0.0f;  // nor into the caller's weights it was copied from
  CHECK(a.max_positions() == 3);
  CHECK(a.d_model() == 2);
  CHECK(a.owns_storage());
  const std::vector<std::int64_t> two{2};
  std::vector<float> out(2);
  a.lookup(posenc::PositionIdsView(two.data(), 1, 1),
           posenc::TensorView<float, 3>(out.data(), 1, 1, 2));
  CHECK(out == std::vector<float>{11.0f, 12.0f});
}

TEST_CASE("learned: extending to the current length is allowed and copies the table",
          "[learned][extend]") {
  const std::vector<float> weights{1, 2, 3, 4, 5, 6};  // [3, 2]
  const posenc::ConstTensorView<float, 2> w(weights.data(), 3, 2);
  const auto same = posenc::extend_learned_table<float>(w, 3, posenc::LearnedExtendInit::kCyclic);
  REQUIRE(same.dimension(0) == 3);
  REQUIRE(same.dimension(1) == 2);
  for (Eigen::Index i = 0; i < 6; ++i) {
    CHECK(same.data()[i] == weights[static_cast<std::size_t>(i)]);
  }
  const auto t = posenc::LearnedPositionTable<float>::view(w).extend(3);
  CHECK(t.max_positions() == 3);
  CHECK(t.owns_storage());
}

TEST_CASE("learned: empty tables and batches and mismatched position rows are rejected",
          "[learned][errors]") {
  const std::vector<float> table(4 * 2, 1.0f);
  std::vector<float> emb(2 * 3 * 2, 0.5f);
  const auto before = emb;
  const std::vector<std::int64_t> ids{0, 1, 2, 0, 1, 2};
  const auto add = [&](posenc::ConstTensorView<float, 2> tv, posenc::TensorView<float, 3> ev,
                       posenc::PositionIdsView pv) {
    posenc::add_learned_positions_inplace<float>(ev, tv, pv);
  };
  const posenc::ConstTensorView<float, 2> tv(table.data(), 4, 2);
  // A table of 0 rows is a shape error (invalid_argument), not a position outside it.
  REQUIRE_THROWS_AS(add(posenc::ConstTensorView<float, 2>(table.data(), 0, 2),
                        posenc::TensorView<float, 3>(emb.data(), 2, 3, 2),
                        posenc::PositionIdsView(ids.data(), 2, 3)),
                    std::invalid_argument);
  // batch = 0.
  REQUIRE_THROWS_AS(add(tv, posenc::TensorView<float, 3>(emb.data(), 0, 3, 2),
                        posenc::PositionIdsView(ids.data(), 0, 3)),
                    std::invalid_argument);
  // position_ids [1, 3] for embeddings [2, 3, 2]: only the batch dimension differs.
  REQUIRE_THROWS_WITH(add(tv, posenc::TensorView<float, 3>(emb.data(), 2, 3, 2),
                          posenc::PositionIdsView(ids.data(), 1, 3)),
                      Contains("position_ids shape [1, 3]"));
  CHECK(emb == before);
  // Extending an empty table.
  REQUIRE_THROWS_AS(posenc::extend_learned_table<float>(
                        posenc::ConstTensorView<float, 2>(table.data(), 0, 2), 2),
                    std::invalid_argument);
}

TEST_CASE("learned: a table of 2^53 rows is accepted, one more row is not", "[learned][errors]") {
  // The views below claim 2^53 (+ 1) rows over one row of storage; only row 0 is ever read.
  const std::vector<float> row{0.25f};
  const std::vector<std::int64_t> ids{0};
  const std::int64_t top = std::int64_t{1} << 53;
  std::vector<float> out{-1.0f};
  posenc::lookup_learned_positions<float>(posenc::ConstTensorView<float, 2>(row.data(), top, 1),
                                          posenc::PositionIdsView(ids.data(), 1, 1),
                                          posenc::TensorView<float, 3>(out.data(), 1, 1, 1));
  CHECK(out[0] == 0.25f);
  out[0] = -1.0f;
  REQUIRE_THROWS_WITH(posenc::lookup_learned_positions<float>(
                          posenc::ConstTensorView<float, 2>(row.data(), top + 1, 1),
                          posenc::PositionIdsView(ids.data(), 1, 1),
                          posenc::TensorView<float, 3>(out.data(), 1, 1, 1)),
                      Contains("max_positions = 9007199254740993 must be <= 2^53"));
  CHECK(out[0] == -1.0f);
}


TEST_CASE("learned: position_ids of the wrong seq length are rejected by add and lookup",
          "[learned][errors]") {
  // position_ids must be [batch, seq] (the header's contract): [2, 2] against embeddings
  // [2, 3, 2] differs only in seq, so only that half of the shape check can refuse it.
  const std::vector<float> table(4 * 2, 1.0f);
  std::vector<float> emb(2 * 3 * 2, 0.5f);
  const auto before = emb;
  const std::vector<std::int64_t> ids{0, 1, 2, 3};
  const posenc::ConstTensorView<float, 2> tv(table.data(), 4, 2);
  const posenc::PositionIdsView short_ids(ids.data(), 2, 2);
  REQUIRE_THROWS_WITH(posenc::add_learned_positions_inplace<float>(
                          posenc::TensorView<float, 3>(emb.data(), 2, 3, 2), tv, short_ids),
                      Contains("position_ids shape [2, 2]"));
  CHECK(emb == before);
  REQUIRE_THROWS_AS(posenc::lookup_learned_positions<float>(
                        tv, short_ids, posenc::TensorView<float, 3>(emb.data(), 2, 3, 2)),
                    std::invalid_argument);
  CHECK(emb == before);
}

TEST_CASE("learned: extending a table of d_model 0 is a shape error", "[learned][extend]") {
  // The header: extend_learned_table throws std::invalid_argument when the table is empty;
  // [3, 0] has rows but no columns (the size bound divides by d_model).
  const std::vector<float> storage(1, 0.0f);
  REQUIRE_THROWS_WITH(posenc::extend_learned_table<float>(
                          posenc::ConstTensorView<float, 2>(storage.data(), 3, 0), 5),
                      Contains("must have max_positions > 0 and d_model > 0"));
}

TEST_CASE("learned: extending to exactly PTRDIFF_MAX bytes passes the size check",
          "[learned][extend]") {
#if defined(POSENC_TEST_UNDER_ASAN)
  // ASan aborts on an allocation request this large instead of returning null.
  SUCCEED("skipped under AddressSanitizer");
#else
  // The bound is new_max_positions * d_model elements past PTRDIFF_MAX bytes: at d_model = 2
  // floats that is (2^63 - 1) / 4 / 2 = 1152921504606846975 rows inclusive. That many rows are
  // not past it, so the request reaches the allocator, which cannot give 2^63 - 8 bytes
  // (std::bad_alloc, as documented); one row more is the size error.
  const std::vector<float> weights{1, 2, 3, 4, 5, 6};  // [3, 2]
  const posenc::ConstTensorView<float, 2> w(weights.data(), 3, 2);
  const Eigen::Index top = 1152921504606846975;
  REQUIRE_THROWS_AS(posenc::extend_learned_table<float>(w, top), std::bad_alloc);
  REQUIRE_THROWS_AS(posenc::extend_learned_table<float>(w, top + 1), std::invalid_argument);
#endif
}
