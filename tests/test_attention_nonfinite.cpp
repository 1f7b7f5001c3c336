// Non-finite values in attention inputs. An engine hands attention memory it does not fully
// control: padding slots never written, pad tokens whose 16-bit activations overflowed, a NaN
// from an earlier layer. The rules (attention_types.hpp, "Non-finite input"):
//  - a padding key (key_mask 0, past key_lengths, a cache's padding slot) never reaches the
//    output, whatever its K and V rows hold: 0 * NaN is NaN, so the kernel must not multiply;
//  - a NaN or +inf logit among the keys a row sees makes that row NaN (out and lse), as
//    softmax(S) V does, and no other row; a -inf logit weighs exactly 0;
//  - merging attention states propagates a NaN part.
// Expected values: the same call with the padding rows holding finite junk (the contents must
// not matter: bit for bit), posenc::reference::attention (double, from the definition; it is
// itself checked to stay finite on poisoned padding), and NaN-ness decided by the rules above.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/attention_merge.hpp>
#include <posenc/float8.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/reference/attention.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"

using posenc::AttentionMetadata;
using posenc::AttentionParams;
using posenc::ConstTensorView;
using posenc::TensorView;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Shape {
  Eigen::Index q_len, k_len, heads, kv_heads, d;
  const char* what;
};

// Prefill tiles (64 keys), the multi-head tile, and the decode item (q_len * group <= 4,
// 128-key tiles read in place), GQA and MHA, head sizes with and without a packet tail.
const Shape kShapes[] = {
    {37, 300, 8, 2, 80, "prefill GQA 4, d 80"},
    {130, 300, 4, 4, 64, "prefill MHA, d 64"},
    {3, 300, 8, 8, 128, "multi-head tiles, d 128"},
    {1, 300, 32, 8, 128, "decode GQA 4, d 128"},
    {1, 300, 4, 4, 64, "decode MHA, d 64"},
    {2, 300, 4, 2, 16, "decode 2 rows x 2 heads, d 16"},
};

/// NaN, +inf, -inf. (GENERATE(kNaN, kInf, -kInf) gave 0 for -kInf in GCC 12's AArch64 -O3
/// build of Catch 2.13.)
float poison_value(int which) { return which == 0 ? kNaN : which == 1 ? kInf : -kInf; }

template <typename T>
double tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  if constexpr (std::is_same_v<T, float>) return 2e-6;
  if constexpr (std::is_same_v<T, Eigen::half>) return 1e-3;
  return 8e-3;  // bfloat16 outputs of magnitude < 1: one rounding is 2^-9
}

template <typename T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
  posenc_test::SplitMix64 rng(seed);
  std::vector<T> x(n);
  for (auto& e : x) e = T(static_cast<float>(rng.uniform()));
  return x;
}

template <typename T>
std::vector<double> as_double(const std::vector<T>& x) {
  if constexpr (std::is_same_v<T, double>) {
    return x;
  } else {
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<double>(static_cast<float>(x[i]));
    return y;
  }
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <typename T>
struct Problem {
  Shape z;
  Eigen::Index batch = 2;
  std::vector<T> q, k, v;
  std::vector<std::uint8_t> key_mask;

  explicit Problem(const Shape& s) : z(s) {
    q = random_values<T>(static_cast<std::size_t>(batch * z.q_len * z.heads * z.d), 1);
    k = random_values<T>(static_cast<std::size_t>(batch * z.k_len * z.kv_heads * z.d), 2);
    v = random_values<T>(k.size(), 3);
    // Sequence 0: a hole of 20 keys across the 128-key decode tile boundary (key 128 starts a
    // tile with a padding key) and the 64-key prefill boundaries 128 and 192 (key 192 too).
    // Sequence 1: 7 left-padding keys.
    key_mask.assign(static_cast<std::size_t>(batch * z.k_len), 1);
    for (Eigen::Index j = 120; j < 140; ++j) key_mask[static_cast<std::size_t>(j)] = 0;
    key_mask[192] = 0;
    for (Eigen::Index j = 0; j < 7; ++j) key_mask[static_cast<std::size_t>(z.k_len + j)] = 0;
  }
  std::size_t row(Eigen::Index b, Eigen::Index j) const {
    return static_cast<std::size_t>((b * z.k_len + j) * z.kv_heads * z.d);
  }
  /// Every element of every padding key's K and V rows set to one of xs, in turn.
  void fill_padding(std::initializer_list<float> xs) {
    std::size_t n = 0;
    for (Eigen::Index b = 0; b < batch; ++b) {
      for (Eigen::Index j = 0; j < z.k_len; ++j) {
        if (key_mask[static_cast<std::size_t>(b * z.k_len + j)] != 0) continue;
        for (Eigen::Index c = 0; c < z.kv_heads * z.d; ++c, ++n) {
          const T x(xs.begin()[n % xs.size()]);
          k[row(b, j) + static_cast<std::size_t>(c)] = x;
          v[row(b, j) + static_cast<std::size_t>(c)] = x;
        }
      }
    }
  }
  AttentionMetadata metadata() const {
    AttentionMetadata m;
    m.key_mask = ConstTensorView<std::uint8_t, 2>(key_mask.data(), batch, z.k_len);
    return m;
  }
  ConstTensorView<T, 4> Q() const { return {q.data(), batch, z.q_len, z.heads, z.d}; }
  ConstTensorView<T, 4> K() const { return {k.data(), batch, z.k_len, z.kv_heads, z.d}; }
  ConstTensorView<T, 4> V() const { return {v.data(), batch, z.k_len, z.kv_heads, z.d}; }
  std::vector<T> fused(const AttentionParams& params, std::vector<float>* lse = nullptr) const {
    std::vector<T> out(q.size(), T(7.0f));
    const TensorView<T, 4> o(out.data(), batch, z.q_len, z.heads, z.d);
    if constexpr (std::is_same_v<T, float>) {
      if (lse) {
        lse->assign(static_cast<std::size_t>(batch * z.q_len * z.heads), 7.0f);
        posenc::attention<T>(Q(), K(), V(), o, TensorView<float, 3>(lse->data(), batch, z.q_len, z.heads),
                             params, metadata());
        return out;
      }
    }
    posenc::attention<T>(Q(), K(), V(), o, params, metadata());
    return out;
  }
  std::vector<T> reference(const AttentionParams& params,
                           std::vector<double>* weights = nullptr) const {
    std::vector<T> out(q.size(), T(7.0f));
    const TensorView<T, 4> o(out.data(), batch, z.q_len, z.heads, z.d);
    if (weights) {
      weights->assign(static_cast<std::size_t>(batch * z.heads * z.q_len * z.k_len), 7.0);
      posenc::reference::attention<T>(
          Q(), K(), V(), o, params, metadata(),
          TensorView<double, 4>(weights->data(), batch, z.heads, z.q_len, z.k_len));
    } else {
      posenc::reference::attention<T>(Q(), K(), V(), o, params, metadata());
    }
    return out;
  }
};

template <typename T>
std::size_t count_nonfinite(const std::vector<T>& x) {
  std::size_t n = 0;
  for (const T& e : x) n += !std::isfinite(static_cast<double>(static_cast<float>(e)));
  return n;
}

template <typename T>
void check_padding_never_read(const Shape& z, const AttentionParams& params) {
  Problem<T> junk(z);
  junk.fill_padding({1e4f});  // finite junk: weight 0 times it is 0
  Problem<T> bad(z);
  bad.fill_padding({kNaN, kInf, -kInf});
  const std::vector<T> want = junk.fused(params);
  const std::vector<T> got = bad.fused(params);
  CHECK(count_nonfinite(got) == 0);
  CHECK(same_bits(got, want));
  // The reference from the definition, which sums over the keys a row sees only.
  const std::vector<T> ref_junk = junk.reference(params), ref_bad = bad.reference(params);
  CHECK(count_nonfinite(ref_bad) == 0);
  CHECK(same_bits(ref_bad, ref_junk));
  const auto a = as_double(got), e = as_double(ref_junk);
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      a.size(), [&](std::size_t i) { return a[i]; }, [&](std::size_t i) { return e[i]; },
      tolerance<T>()));
}

}  // namespace

TEST_CASE("attention nonfinite: NaN or Inf in padding keys never reaches the output",
          "[attention][nonfinite]") {
  const bool sliding = GENERATE(false, true);
  AttentionParams params;
  if (sliding) params.sliding_window = 150;  // the decode rows see the hole, some rows do not
  for (const Shape& z : kShapes) {
    CAPTURE(z.what, sliding);
    check_padding_never_read<float>(z, params);
    check_padding_never_read<double>(z, params);
    check_padding_never_read<Eigen::half>(z, params);
    check_padding_never_read<Eigen::bfloat16>(z, params);
  }
}

TEST_CASE("attention nonfinite: a NaN or +inf logit makes exactly the rows that see it NaN",
          "[attention][nonfinite]") {
  // Key 250 of sequence 0, kv head 1: element 0 of its K row poisoned, element 0 of every Q
  // row set to 0.5, so each logit on it is 0.5 * poison * scale: NaN, +inf or -inf. The rows
  // that see it are the query heads of kv head 1 whose causal limit reaches key 250.
  const float poison = poison_value(GENERATE(0, 1, 2));
  for (const Shape& z : kShapes) {
    CAPTURE(z.what, poison);
    Problem<float> p(z);
    for (std::size_t i = 0; i < p.q.size(); i += static_cast<std::size_t>(z.d)) p.q[i] = 0.5f;
    const std::size_t at = p.row(0, 250) + static_cast<std::size_t>(1 * z.d);
    p.k[at] = poison;
    const AttentionParams params;
    std::vector<float> lse;
    const std::vector<float> out = p.fused(params, &lse);
    std::vector<double> weights;
    const std::vector<float> ref = p.reference(params, &weights);
    const Eigen::Index group = z.heads / z.kv_heads;
    for (Eigen::Index b = 0; b < p.batch; ++b) {
      for (Eigen::Index i = 0; i < z.q_len; ++i) {
        for (Eigen::Index h = 0; h < z.heads; ++h) {
          const bool sees = b == 0 && h / group == 1 && i + z.k_len - z.q_len >= 250;
          const bool nan_row = sees && !(poison < 0.0f);
          const auto r = static_cast<std::size_t>((b * z.q_len + i) * z.heads + h);
          CAPTURE(b, i, h, sees);
          CHECK(std::isnan(lse[r]) == nan_row);
          // The reference's weight on key 250: NaN in a NaN row, exactly 0 for a -inf logit.
          const double w =
              weights[static_cast<std::size_t>(((b * z.heads + h) * z.q_len + i) * z.k_len + 250)];
          if (nan_row) CHECK(std::isnan(w));
          if (sees && !nan_row) CHECK(w == 0.0);
          // Elements that break the rule, counted per row (one assertion a row).
          int wrong_out = 0, wrong_ref = 0, far = 0;
          for (Eigen::Index c = 0; c < z.d; ++c) {
            const std::size_t e = r * static_cast<std::size_t>(z.d) + static_cast<std::size_t>(c);
            wrong_out += std::isnan(out[e]) != nan_row;
            wrong_ref += std::isnan(ref[e]) != nan_row;
            far += !nan_row && !(std::abs(out[e] - ref[e]) <= 2e-6);
          }
          CHECK(wrong_out == 0);
          CHECK(wrong_ref == 0);
          CHECK(far == 0);
        }
      }
    }
  }
}

TEST_CASE("attention nonfinite: keys visible only as -inf logits leave the row at zero",
          "[attention][nonfinite]") {
  // Decode, one sequence: every key's K row of kv head 0 has -inf in element 0, every Q row
  // +0.5 there, so each logit of heads 0..3 is -inf: a row that sees no finite logit is a row
  // with no visible key (zeros, lse -inf), in the fused kernel and the reference alike.
  const Shape z{1, 300, 8, 2, 64, "decode"};
  Problem<float> p(z);
  p.key_mask.assign(p.key_mask.size(), 1);
  for (std::size_t i = 0; i < p.q.size(); i += static_cast<std::size_t>(z.d)) p.q[i] = 0.5f;
  for (Eigen::Index j = 0; j < z.k_len; ++j) p.k[p.row(0, j)] = -kInf;
  std::vector<float> lse;
  const std::vector<float> out = p.fused(AttentionParams{}, &lse);
  const std::vector<float> ref = p.reference(AttentionParams{});
  for (Eigen::Index h = 0; h < z.heads; ++h) {
    CAPTURE(h);
    const bool empty = h < 4;
    CHECK((lse[static_cast<std::size_t>(h)] == -kInf) == empty);
    for (Eigen::Index c = 0; c < z.d; ++c) {
      const auto e = static_cast<std::size_t>(h * z.d + c);
      if (empty) {
        CHECK(out[e] == 0.0f);
        CHECK(ref[e] == 0.0f);
      } else {
        CHECK(std::abs(out[e] - ref[e]) <= 2e-6);
      }
    }
  }
}

TEST_CASE("attention nonfinite: with sinks, keys seen only as -inf logits still weigh exactly 0",
          "[attention][nonfinite]") {
  // As above, with a sink per head (GPT-OSS): the sink keeps the running max finite, so the
  // kernel cannot tell these rows by m = -inf; their keys' weights are exp(-inf) = 0 still,
  // so out is exactly 0 and lse the sink logit (softmax over {sink, -inf, ...}). Found by the
  // attention fuzzer (tests/fuzz/fuzz_attention.cpp): out held ~1e-39 v (Eigen's pexp clamps
  // -inf to -88.7). Every shape: prefill tiles, multi-head tiles and decode items.
  for (const Shape& z : kShapes) {
    CAPTURE(z.what);
    Problem<float> p(z);
    p.key_mask.assign(p.key_mask.size(), 1);
    for (std::size_t i = 0; i < p.q.size(); i += static_cast<std::size_t>(z.d)) p.q[i] = 0.5f;
    for (Eigen::Index b = 0; b < p.batch; ++b) {
      for (Eigen::Index j = 0; j < z.k_len; ++j) p.k[p.row(b, j)] = -kInf;  // kv head 0
    }
    AttentionParams params;
    for (Eigen::Index h = 0; h < z.heads; ++h) params.sink_logits.push_back(0.25 * double(h) - 1);
    std::vector<float> lse;
    const std::vector<float> out = p.fused(params, &lse);
    const std::vector<float> ref = p.reference(params);
    const Eigen::Index group = z.heads / z.kv_heads;
    std::size_t wrong = 0;
    for (Eigen::Index row = 0; row < p.batch * z.q_len; ++row) {
      for (Eigen::Index h = 0; h < z.heads; ++h) {
        const auto at = static_cast<std::size_t>(row * z.heads + h);
        if (h >= group) {
          // Other kv heads: a finite row, as the reference gives it.
          for (Eigen::Index c = 0; c < z.d; ++c) {
            const auto e = at * static_cast<std::size_t>(z.d) + static_cast<std::size_t>(c);
            wrong += !(std::abs(out[e] - ref[e]) <= 2e-6);
          }
          continue;
        }
        wrong += lse[at] != static_cast<float>(params.sink_logits[static_cast<std::size_t>(h)]);
        for (Eigen::Index c = 0; c < z.d; ++c) {
          const auto e = at * static_cast<std::size_t>(z.d) + static_cast<std::size_t>(c);
          wrong += out[e] != 0.0f || ref[e] != 0.0f;
        }
      }
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("attention nonfinite: a soft cap turns an infinite logit into a finite one",
          "[attention][nonfinite]") {
  // Gemma-2's cap: c tanh(+-inf / c) = +-c, so the row stays finite and matches the
  // reference; an infinite V element still reaches the rows that see its key.
  const Shape z{1, 300, 8, 2, 64, "decode"};
  Problem<float> p(z);
  for (std::size_t i = 0; i < p.q.size(); i += static_cast<std::size_t>(z.d)) p.q[i] = 0.5f;
  p.k[p.row(0, 250)] = kInf;
  p.k[p.row(0, 251)] = -kInf;
  AttentionParams params;
  params.logit_softcap = 30.0;
  const std::vector<float> out = p.fused(params), ref = p.reference(params);
  CHECK(count_nonfinite(out) == 0);
  CHECK(count_nonfinite(ref) == 0);
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      out.size(), [&](std::size_t i) { return out[i]; }, [&](std::size_t i) { return ref[i]; },
      2e-6));
  p.v[p.row(0, 250) + 3] = kInf;  // kv head 0, element 3: rows of heads 0..3 of sequence 0
  const std::vector<float> out_inf = p.fused(params), ref_inf = p.reference(params);
  for (Eigen::Index b = 0; b < p.batch; ++b) {
    for (Eigen::Index h = 0; h < z.heads; ++h) {
      const auto e = static_cast<std::size_t>((b * z.heads + h) * z.d + 3);
      CHECK(std::isinf(out_inf[e]) == (b == 0 && h < 4));
      CHECK(std::isinf(ref_inf[e]) == (b == 0 && h < 4));
    }
  }
  CHECK(count_nonfinite(out_inf) == 4);
  CHECK(count_nonfinite(ref_inf) == 4);
}

TEST_CASE("attention nonfinite: merging a NaN state gives NaN, not the other part",
          "[attention][nonfinite][merge]") {
  // Split-K decode: keys [0, 150) and [150, 300). A NaN in key 40 of kv head 0 makes the
  // heads of kv head 0 NaN in part A; merged, those rows are NaN (the whole attention is), the
  // others equal one attention over all keys.
  const Shape z{1, 300, 8, 2, 64, "decode"};
  Problem<float> p(z);
  p.batch = 1;
  p.key_mask.assign(static_cast<std::size_t>(z.k_len), 1);
  p.k[p.row(0, 40) + 5] = kNaN;
  const Eigen::Index cut = 150, row = z.kv_heads * z.d;
  std::vector<std::int64_t> kpos(static_cast<std::size_t>(z.k_len));
  for (Eigen::Index j = 0; j < z.k_len; ++j) kpos[static_cast<std::size_t>(j)] = j;
  const std::int64_t qpos = z.k_len - 1;
  auto part = [&](Eigen::Index j0, Eigen::Index n, std::vector<float>& out, std::vector<float>& lse) {
    out.assign(static_cast<std::size_t>(z.heads * z.d), 7.0f);
    lse.assign(static_cast<std::size_t>(z.heads), 7.0f);
    AttentionMetadata meta;
    meta.query_positions = posenc::PositionIdsView(&qpos, 1, 1);
    meta.key_positions = posenc::PositionIdsView(kpos.data() + j0, 1, n);
    posenc::attention<float>(ConstTensorView<float, 4>(p.q.data(), 1, 1, z.heads, z.d),
                             ConstTensorView<float, 4>(p.k.data() + j0 * row, 1, n, z.kv_heads, z.d),
                             ConstTensorView<float, 4>(p.v.data() + j0 * row, 1, n, z.kv_heads, z.d),
                             TensorView<float, 4>(out.data(), 1, 1, z.heads, z.d),
                             TensorView<float, 3>(lse.data(), 1, 1, z.heads), AttentionParams{}, meta);
  };
  std::vector<float> out_a, lse_a, out_b, lse_b;
  part(0, cut, out_a, lse_a);
  part(cut, z.k_len - cut, out_b, lse_b);
  auto merge = [&](std::vector<float>& out, std::vector<float>& lse,
                   const std::vector<float>& other, const std::vector<float>& other_lse) {
    posenc::merge_attention_state_inplace<float>(
        TensorView<float, 4>(out.data(), 1, 1, z.heads, z.d),
        TensorView<float, 3>(lse.data(), 1, 1, z.heads),
        ConstTensorView<float, 4>(other.data(), 1, 1, z.heads, z.d),
        ConstTensorView<float, 3>(other_lse.data(), 1, 1, z.heads));
  };
  // The NaN part on either side of the merge.
  std::vector<float> out_ba = out_b, lse_ba = lse_b;
  merge(out_ba, lse_ba, out_a, lse_a);
  merge(out_a, lse_a, out_b, lse_b);
  std::vector<float> ref(out_a.size());
  posenc::reference::attention<float>(ConstTensorView<float, 4>(p.q.data(), 1, 1, z.heads, z.d),
                                      ConstTensorView<float, 4>(p.k.data(), 1, z.k_len, z.kv_heads, z.d),
                                      ConstTensorView<float, 4>(p.v.data(), 1, z.k_len, z.kv_heads, z.d),
                                      TensorView<float, 4>(ref.data(), 1, 1, z.heads, z.d));
  for (Eigen::Index h = 0; h < z.heads; ++h) {
    CAPTURE(h);
    const bool nan_row = h < 4;
    CHECK(std::isnan(lse_a[static_cast<std::size_t>(h)]) == nan_row);
    CHECK(std::isnan(lse_ba[static_cast<std::size_t>(h)]) == nan_row);
    for (Eigen::Index c = 0; c < z.d; ++c) {
      const auto e = static_cast<std::size_t>(h * z.d + c);
      CHECK(std::isnan(out_a[e]) == nan_row);
      CHECK(std::isnan(out_ba[e]) == nan_row);
      CHECK(std::isnan(ref[e]) == nan_row);
      if (!nan_row) CHECK(std::abs(out_a[e] - ref[e]) <= 2e-6);
    }
  }
}

TEST_CASE("attention nonfinite: a KV cache's padding tokens whose keys and values overflowed",
          "[attention][nonfinite][kv_cache]") {
  // A left-padded batch appended with its padding tokens (valid = 0) holding +-inf / NaN, as a
  // half model's pad activations can; then decode steps. The padding slots hold the poison (a
  // half cache stores inf as inf, an E4M3 cache stores a NaN code), yet every output equals the
  // one of a cache whose padding tokens held finite junk, bit for bit, and the reference over
  // the cache's own stored rows.
  const float poison = poison_value(GENERATE(0, 1, 2));
  const Eigen::Index batch = 2, prompt = 150, steps = 3, kv_heads = 2, heads = 8, d = 64;
  const Eigen::Index max_len = prompt + steps;
  auto run = [&](auto tag, float pad_value, std::vector<float>* stored_out) {
    using T = decltype(tag);
    posenc::KvCache<T> cache(batch, max_len, kv_heads, d);
    auto k = random_values<float>(static_cast<std::size_t>(batch * prompt * kv_heads * d), 11);
    auto v = random_values<float>(k.size(), 12);
    std::vector<std::uint8_t> valid(static_cast<std::size_t>(batch * prompt), 1);
    std::vector<std::int64_t> pos(valid.size());
    // Sequence 1: 9 padding tokens, then its tokens at positions 0, 1, ...
    for (Eigen::Index s = 0; s < prompt; ++s) {
      pos[static_cast<std::size_t>(s)] = s;
      pos[static_cast<std::size_t>(prompt + s)] = std::max<Eigen::Index>(0, s - 9);
    }
    for (Eigen::Index s = 0; s < 9; ++s) {
      valid[static_cast<std::size_t>(prompt + s)] = 0;
      for (Eigen::Index c = 0; c < kv_heads * d; ++c) {
        const auto at = static_cast<std::size_t>((prompt + s) * kv_heads * d + c);
        k[at] = pad_value;
        v[at] = pad_value;
      }
    }
    cache.append(ConstTensorView<float, 4>(k.data(), batch, prompt, kv_heads, d),
                 ConstTensorView<float, 4>(v.data(), batch, prompt, kv_heads, d),
                 posenc::PositionIdsView(pos.data(), batch, prompt),
                 ConstTensorView<std::uint8_t, 2>(valid.data(), batch, prompt));
    std::vector<float> outs;
    for (Eigen::Index t = 0; t < steps; ++t) {
      const auto kt = random_values<float>(static_cast<std::size_t>(batch * kv_heads * d), 20 + t);
      const auto vt = random_values<float>(kt.size(), 30 + t);
      const std::vector<std::int64_t> pt = {prompt + t, prompt - 9 + t};
      cache.append(ConstTensorView<float, 4>(kt.data(), batch, 1, kv_heads, d),
                   ConstTensorView<float, 4>(vt.data(), batch, 1, kv_heads, d),
                   posenc::PositionIdsView(pt.data(), batch, 1));
      const auto q = random_values<float>(static_cast<std::size_t>(batch * heads * d), 40 + t);
      std::vector<float> out(q.size(), 7.0f);
      cache.attend(ConstTensorView<float, 4>(q.data(), batch, 1, heads, d),
                   TensorView<float, 4>(out.data(), batch, 1, heads, d));
      outs.insert(outs.end(), out.begin(), out.end());
      if constexpr (!posenc::detail::is_float8_v<T>) {
        if (t == steps - 1 && stored_out) {
          // The reference over the stored rows (widened to float), padding slots masked.
          std::vector<float> ks(static_cast<std::size_t>(batch * max_len * kv_heads * d));
          std::vector<float> vs(ks.size());
          for (std::size_t i = 0; i < ks.size(); ++i) {
            ks[i] = static_cast<float>(cache.keys().data()[i]);
            vs[i] = static_cast<float>(cache.values().data()[i]);
          }
          AttentionMetadata meta;
          meta.key_mask = cache.valid();
          std::vector<std::int64_t> qp = {prompt + t, prompt - 9 + t};
          meta.query_positions = posenc::PositionIdsView(qp.data(), batch, 1);
          meta.key_positions = cache.positions();
          stored_out->assign(out.size(), 7.0f);
          posenc::reference::attention<float>(
              ConstTensorView<float, 4>(q.data(), batch, 1, heads, d),
              ConstTensorView<float, 4>(ks.data(), batch, max_len, kv_heads, d),
              ConstTensorView<float, 4>(vs.data(), batch, max_len, kv_heads, d),
              TensorView<float, 4>(stored_out->data(), batch, 1, heads, d), AttentionParams{}, meta);
          stored_out->insert(stored_out->begin(), out.begin(), out.end());  // [fused | ref]
        }
      }
    }
    return outs;
  };
  auto check = [&](auto tag, const char* name) {
    CAPTURE(name, poison);
    std::vector<float> both;
    const std::vector<float> bad = run(tag, poison, &both);
    const std::vector<float> junk = run(tag, 1e4f, nullptr);
    CHECK(count_nonfinite(bad) == 0);
    CHECK(same_bits(bad, junk));
    if (!both.empty()) {
      const std::size_t n = both.size() / 2;
      CHECK(count_nonfinite(both) == 0);
      POSENC_REQUIRE_CLOSE(posenc_test::compare(
          n, [&](std::size_t i) { return both[i]; }, [&](std::size_t i) { return both[n + i]; },
          2e-6));
    }
  };
  check(float{}, "float cache");
  check(Eigen::half{}, "half cache");
  check(Eigen::bfloat16{}, "bfloat16 cache");
  check(posenc::float8_e4m3{}, "float8_e4m3 cache");
}
