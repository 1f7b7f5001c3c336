// Speculative decoding: verify a tree of draft tokens in one attention pass (tree attention, as
// FlashInfer's custom_mask and vLLM's tree backend), then keep the accepted path.
//
//   prefix "the cat" + 1 token (3 tokens, positions 0 1 2), then a draft tree of 4 tokens:
//
//            +-- sat (0) -- on (1)         draft slot  0    1    2    3
//     cat ---+                             token       sat  on   ran  away
//            +-- ran (2) -- away (3)       parent      -    0    -    2
//
//   q / k / v rows: heads 2, kv_heads 1, head_dim 8, entries uniform in [-1, 1) (splitmix64);
//   RoPE (theta 10000, half-split) applied by the KV cache at each token's position.
//
// 1. A draft token sits at its parent's position + 1, so siblings share a position:
// expect: draft positions: 3 4 3 4
//    and sees its ancestors and itself (row i of the tree mask, over draft slots 0..3):
// expect: mask row 1 (on):   1 1 0 0
// expect: mask row 3 (away): 0 0 1 1
//
// 2. One call over the four draft tokens gives each the output of ordinary causal decoding
//    of its own sequence, e.g. "the cat . ran away" at positions 0..4:
// expect: every draft token == causal attention over its own path (< 1e-5): yes
//    With the slots' positions (3 4 5 6) instead of the depths, "away" would be rotated as
//    if "sat on ran" came before it:
// expect: positions by slot instead of depth change the outputs (> 1e-3): yes
//
// 3. Accept "ran away": erase the rejected slots (the last first) and the cache holds an
//    ordinary prefix at positions 0..4; the next token (position 5) decodes as usual.
// expect: after erasing the rejected slots: 5 tokens, next token == plain decode (< 1e-5): yes

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <posenc/kv_cache.hpp>

namespace {

constexpr Eigen::Index kHeads = 2, kKvHeads = 1, kD = 8;

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::vector<float> uniform(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(static_cast<double>(splitmix(seed) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  return v;
}

// Token n's rows: prefix 0..2, draft 3..6 (sat, on, ran, away), then the next token 7.
const std::vector<float> q = uniform(8 * kHeads * kD, 1), k = uniform(8 * kKvHeads * kD, 2),
                         v = uniform(8 * kKvHeads * kD, 3);

posenc::ConstTensorView<float, 4> rows(const std::vector<float>& x, Eigen::Index token, Eigen::Index n,
                                       Eigen::Index heads) {
  return {x.data() + token * heads * kD, 1, n, heads, kD};
}

posenc::KvCache<float> rope_cache() {
  posenc::KvCache<float> cache(1, 16, kKvHeads, kD);
  posenc::RopeParams rp;
  rp.head_dim = kD;
  cache.set_rope(posenc::compute_rope_frequencies(rp), posenc::RopeLayout::kHalfSplit);
  return cache;
}

/// Plain causal decoding of `tokens` at positions 0, 1, ...: the last token's output.
std::vector<float> decode_path(const std::vector<Eigen::Index>& tokens) {
  auto cache = rope_cache();
  for (std::size_t n = 0; n < tokens.size(); ++n) {
    const std::int64_t at[1] = {static_cast<std::int64_t>(n)};
    cache.append(rows(k, tokens[n], 1, kKvHeads), rows(v, tokens[n], 1, kKvHeads), posenc::PositionIdsView(at, 1, 1));
  }
  std::vector<float> out(kHeads * kD);
  cache.attend(rows(q, tokens.back(), 1, kHeads), posenc::TensorView<float, 4>(out.data(), 1, 1, kHeads, kD));
  return out;
}

double max_diff(const float* a, const std::vector<float>& b) {
  double m = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace

int main() {
  const int parent[4] = {-1, 0, -1, 2};
  std::int64_t pos[4];
  std::uint8_t mask[16] = {};
  for (int t = 0; t < 4; ++t) {
    pos[t] = parent[t] < 0 ? 3 : pos[parent[t]] + 1;
    for (int a = t; a >= 0; a = parent[a]) mask[t * 4 + a] = 1;
  }
  std::printf("draft positions: %lld %lld %lld %lld\n", static_cast<long long>(pos[0]),
              static_cast<long long>(pos[1]), static_cast<long long>(pos[2]), static_cast<long long>(pos[3]));
  std::printf("mask row 1 (on):   %d %d %d %d\n", mask[4], mask[5], mask[6], mask[7]);
  std::printf("mask row 3 (away): %d %d %d %d\n", mask[12], mask[13], mask[14], mask[15]);

  // --- 2. verify the tree in one call -------------------------------------------------------
  const auto verify = [&](const std::int64_t* draft_pos, posenc::KvCache<float>& cache) {
    const std::int64_t prefix_pos[3] = {0, 1, 2};
    cache.append(rows(k, 0, 3, kKvHeads), rows(v, 0, 3, kKvHeads), posenc::PositionIdsView(prefix_pos, 1, 3));
    cache.append(rows(k, 3, 4, kKvHeads), rows(v, 3, 4, kKvHeads), posenc::PositionIdsView(draft_pos, 1, 4));
    std::vector<float> out(4 * kHeads * kD);
    cache.attend(rows(q, 3, 4, kHeads), posenc::TensorView<float, 4>(out.data(), 1, 4, kHeads, kD),
                 posenc::ConstTensorView<std::uint8_t, 3>(mask, 1, 4, 4));
    return out;
  };
  auto cache = rope_cache();
  const auto out = verify(pos, cache);
  const std::vector<std::vector<Eigen::Index>> paths = {{0, 1, 2, 3}, {0, 1, 2, 3, 4}, {0, 1, 2, 5}, {0, 1, 2, 5, 6}};
  bool all = true;
  for (int t = 0; t < 4; ++t) all = all && max_diff(out.data() + t * kHeads * kD, decode_path(paths[t])) < 1e-5;
  std::printf("every draft token == causal attention over its own path (< 1e-5): %s\n", all ? "yes" : "no");
  auto by_slot_cache = rope_cache();
  const std::int64_t slots[4] = {3, 4, 5, 6};
  const auto by_slot = verify(slots, by_slot_cache);
  const bool differs = max_diff(by_slot.data() + 3 * kHeads * kD, decode_path(paths[3])) > 1e-3;
  std::printf("positions by slot instead of depth change the outputs (> 1e-3): %s\n", differs ? "yes" : "no");

  // --- 3. accept "ran away", continue --------------------------------------------------------
  cache.erase(3 + 1, 1);  // "on"
  cache.erase(3 + 0, 1);  // "sat"
  const Eigen::Index kept = cache.size();
  const std::int64_t next[1] = {5};
  cache.append(rows(k, 7, 1, kKvHeads), rows(v, 7, 1, kKvHeads), posenc::PositionIdsView(next, 1, 1));
  std::vector<float> step(kHeads * kD);
  cache.attend(rows(q, 7, 1, kHeads), posenc::TensorView<float, 4>(step.data(), 1, 1, kHeads, kD));
  const bool same = max_diff(step.data(), decode_path({0, 1, 2, 5, 6, 7})) < 1e-5;
  std::printf("after erasing the rejected slots: %lld tokens, next token == plain decode (< 1e-5): %s\n",
              static_cast<long long>(kept), same ? "yes" : "no");
  return all && differs && same ? 0 : 1;
}
