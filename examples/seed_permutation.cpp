// Permutation equivariance of self-attention (seed 000 §1.2) and how positions break it.
//
//   X      [n = 5 tokens, d_model = 16], entries uniform in [-1, 1) from splitmix64 (seed 1)
//   Wq, Wk, Wv [16, 16], entries uniform in [-0.5, 0.5) (the same generator, continued)
//   Q, K, V = X Wq, X Wk, X Wv, read as [batch 1, n 5, heads 4, head_dim 4] (BSHD)
//   Attn(X) = softmax(Q K^T / sqrt(4)) V per head, heads concatenated back to [5, 16]
//   P      = a row permutation, (PX)[i] = X[perm[i]] with perm = {3, 0, 4, 1, 2}
//
// With no positions and no mask, Q' = PQ, K' = PK, V' = PV, so Q'K'^T = P (Q K^T) P^T; the
// row-wise softmax commutes with permuting rows and columns together, hence
// Attn(PX) = P Attn(X): the layer sees a bag of tokens. Everything runs in double, so "equal"
// means rounding only (< 1e-12).
// expect: no positions, no mask: max |Attn(PX) - P Attn(X)| < 1e-12: yes
//
// Each way of telling the model where a token is breaks that symmetry, because the position
// belongs to the slot (0, 1, 2, ...), not to the token that was moved into it:
//   - a causal mask alone: token i sees tokens 0..i, a different set after the shuffle;
//   - sinusoidal PE(slot) added to X before the projections (Vaswani et al. §3.5);
//   - RoPE rotating Q and K by their slot (the score depends on slot_i - slot_j);
//   - ALiBi adding -m_h |slot_i - slot_j| to the scores (slopes 1/4, 1/16, 1/64, 1/256).
// The differences are of the size of the outputs themselves (0.2 to 1.5), far above 1e-3:
// expect: causal mask only: max |Attn(PX) - P Attn(X)| > 1e-3: yes
// expect: sinusoidal PE added to X: max |Attn(PX) - P Attn(X)| > 1e-3: yes
// expect: RoPE on Q and K: max |Attn(PX) - P Attn(X)| > 1e-3: yes
// expect: ALiBi bias: max |Attn(PX) - P Attn(X)| > 1e-3: yes
//
// Order enters only through position_ids: give every moved token its original position
// (position_ids = perm) and equivariance is back, bit for bit up to summation order.
// expect: sinusoidal, ids travel along: max |Attn(PX) - P Attn(X)| < 1e-12: yes
// expect: RoPE, ids travel along: max |Attn(PX) - P Attn(X)| < 1e-12: yes
// expect: ALiBi, ids travel along: max |Attn(PX) - P Attn(X)| < 1e-12: yes
//
// "A B C" vs "C B A" (seed §15.4): reversal maps slot i to 4 - i and keeps |i - j|, so a
// bidirectional ALiBi layer cannot tell a sequence from its reverse; RoPE sees i - j change
// sign (a rotation by the opposite angle) and can.
// expect: reversed, ALiBi bidirectional: max |Attn(PX) - P Attn(X)| < 1e-12: yes
// expect: reversed, RoPE: max |Attn(PX) - P Attn(X)| > 1e-3: yes

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <posenc/alibi.hpp>
#include <posenc/attention.hpp>
#include <posenc/attention_rope.hpp>
#include <posenc/rope_frequencies.hpp>
#include <posenc/sinusoidal.hpp>

namespace {

constexpr Eigen::Index N = 5, DM = 16, H = 4, HD = 4;

// splitmix64 (Steele, Lea, Flood 2014): the same numbers on every compiler and library.
std::uint64_t g_state = 1;
double uniform(double lo, double hi) {  // [lo, hi)
  std::uint64_t z = (g_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1.0p-53;
}

enum class Scheme { kNone, kSinusoidal, kRope, kAlibi };

std::vector<double> g_wq, g_wk, g_wv;  // [DM, DM], row = input feature

// y[n, o] = sum_i x[n, i] W[i, o]
std::vector<double> project(const std::vector<double>& x, const std::vector<double>& w) {
  std::vector<double> y(static_cast<std::size_t>(N * DM), 0.0);
  for (Eigen::Index n = 0; n < N; ++n)
    for (Eigen::Index i = 0; i < DM; ++i)
      for (Eigen::Index o = 0; o < DM; ++o) y[n * DM + o] += x[n * DM + i] * w[i * DM + o];
  return y;
}

// One self-attention layer over x [N, DM]; pos[i] is the position of the token in slot i.
std::vector<double> self_attention(std::vector<double> x, Scheme scheme, posenc::MaskMode mask,
                                   const std::vector<std::int64_t>& pos) {
  const posenc::PositionIdsView ids(pos.data(), 1, N);
  if (scheme == Scheme::kSinusoidal) {
    posenc::add_sinusoidal_inplace<double>(posenc::TensorView<double, 3>(x.data(), 1, N, DM), ids);
  }
  const auto q = project(x, g_wq), k = project(x, g_wk), v = project(x, g_wv);
  std::vector<double> out(q.size());
  posenc::AttentionParams params;  // scale 1/sqrt(head_dim) = 1/2
  params.mask = mask;
  if (scheme == Scheme::kAlibi) params.alibi_slopes = posenc::alibi_slopes(H);
  posenc::AttentionMetadata meta;
  meta.query_positions = ids;
  meta.key_positions = ids;
  const posenc::ConstTensorView<double, 4> qv(q.data(), 1, N, H, HD), kv(k.data(), 1, N, H, HD),
      vv(v.data(), 1, N, H, HD);
  const posenc::TensorView<double, 4> ov(out.data(), 1, N, H, HD);
  if (scheme == Scheme::kRope) {
    posenc::RopeParams rp;  // theta 10000: inv_freq = {1, 0.01}
    rp.head_dim = HD;
    posenc::attention_with_rope<double>(qv, kv, vv, ov, posenc::compute_rope_frequencies(rp),
                                        posenc::RopeLayout::kHalfSplit, params, meta);
  } else {
    posenc::attention<double>(qv, kv, vv, ov, params, meta);
  }
  return out;
}

bool g_ok = true;

// Runs the layer on X (slots 0..4) and on PX, prints max |Attn(PX)[i] - Attn(X)[perm[i]]|.
// carry_ids: the token in slot i keeps its original position perm[i].
void compare(const char* label, const std::vector<double>& x, const std::vector<std::int64_t>& perm,
             Scheme scheme, posenc::MaskMode mask, bool carry_ids, bool expect_equal) {
  std::vector<std::int64_t> slots(N);
  for (Eigen::Index i = 0; i < N; ++i) slots[i] = i;
  std::vector<double> px(x.size());
  for (Eigen::Index i = 0; i < N; ++i)
    std::copy_n(x.begin() + perm[i] * DM, DM, px.begin() + i * DM);
  const auto a = self_attention(x, scheme, mask, slots);
  const auto b = self_attention(px, scheme, mask, carry_ids ? perm : slots);
  double diff = 0.0;
  for (Eigen::Index i = 0; i < N; ++i)
    for (Eigen::Index c = 0; c < DM; ++c)
      diff = std::max(diff, std::abs(b[i * DM + c] - a[perm[i] * DM + c]));
  const bool verdict = expect_equal ? diff < 1e-12 : diff > 1e-3;
  g_ok = g_ok && verdict;
  std::printf("%s max |Attn(PX) - P Attn(X)| %s: %s   (%.2e)\n", label,
              expect_equal ? "< 1e-12" : "> 1e-3", verdict ? "yes" : "NO", diff);
}

}  // namespace

int main() {
  std::vector<double> x(static_cast<std::size_t>(N * DM));
  for (auto& e : x) e = uniform(-1.0, 1.0);
  for (auto* w : {&g_wq, &g_wk, &g_wv}) {
    w->resize(static_cast<std::size_t>(DM * DM));
    for (auto& e : *w) e = uniform(-0.5, 0.5);
  }
  std::printf("X[0][0..3] = %.6f %.6f %.6f %.6f (splitmix64, seed 1)\n\n", x[0], x[1], x[2], x[3]);

  using posenc::MaskMode;
  const std::vector<std::int64_t> perm = {3, 0, 4, 1, 2}, reversed = {4, 3, 2, 1, 0};
  std::printf("P: (PX)[i] = X[perm[i]], perm = {3, 0, 4, 1, 2}\n");
  compare("no positions, no mask:", x, perm, Scheme::kNone, MaskMode::kBidirectional, false, true);
  compare("causal mask only:", x, perm, Scheme::kNone, MaskMode::kCausal, false, false);
  compare("sinusoidal PE added to X:", x, perm, Scheme::kSinusoidal, MaskMode::kBidirectional, false, false);
  compare("RoPE on Q and K:", x, perm, Scheme::kRope, MaskMode::kBidirectional, false, false);
  compare("ALiBi bias:", x, perm, Scheme::kAlibi, MaskMode::kBidirectional, false, false);

  std::printf("\nthe same, with each token keeping its position (position_ids = perm):\n");
  compare("sinusoidal, ids travel along:", x, perm, Scheme::kSinusoidal, MaskMode::kBidirectional, true, true);
  compare("RoPE, ids travel along:", x, perm, Scheme::kRope, MaskMode::kBidirectional, true, true);
  compare("ALiBi, ids travel along:", x, perm, Scheme::kAlibi, MaskMode::kBidirectional, true, true);

  std::printf("\nP = reversal, \"A B C D E\" -> \"E D C B A\":\n");
  compare("reversed, ALiBi bidirectional:", x, reversed, Scheme::kAlibi, MaskMode::kBidirectional, false, true);
  compare("reversed, RoPE:", x, reversed, Scheme::kRope, MaskMode::kBidirectional, false, false);
  return g_ok ? 0 : 1;
}
