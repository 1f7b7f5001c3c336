// A tiny decoder-only language model around posenc: the shape of an engine that links it.
//
//   vocab 32, d_model 64, 2 layers, GQA with 4 query heads over 2 KV heads, head_dim 16,
//   RoPE (theta 10000, half-split pairs, as Llama / GPT-NeoX), RMSNorm (eps 1e-5, gain 1),
//   SwiGLU MLP 64 -> 128 -> 64, separate LM head [64, 32] (a head tied to the embedding makes
//   random weights echo the last token: its own embedding dominates the residual stream).
//   Weights: splitmix64 uniform in [-1, 1), divided by sqrt(fan_in) (embedding: not divided).
//   Storage and arithmetic: float. Causal attention, scale 1/sqrt(16).
//
//   per layer:  a = rmsnorm(h)
//               q = a Wq [len, 4, 16], k = a Wk [len, 2, 16], v = a Wv [len, 2, 16]
//               h += attention(rope(q), rope(k), v) Wo        (posenc: KvCache or attention_with_rope)
//               a = rmsnorm(h);  h += (silu(a Wg) * (a Wu)) Wd
//   logits = rmsnorm(h) W_head
//
// Greedy generation of 8 tokens after the 4-token prompt {1, 2, 3, 4}, two ways:
//   (a) with a KV cache per layer: prefill the prompt at positions 0..3, then one token per
//       step at position t = number of cached tokens (KvCache rotates keys once, on append);
//   (b) without a cache: run the whole sequence 0..t again at every step, last row only.
// Both compute the same function, so they pick the same tokens and their logits differ only by
// float rounding (different summation order in the attention tiles; well below 1e-4).
// expect: identical: yes
// expect: max |logit difference| over 8 steps < 1e-4: yes
// Feeding the same tokens through a cache whose decode tokens are all at position 0 changes
// the logits clearly (RoPE makes the model position-aware):
// expect: decode at position 0 instead: max |logit difference| > 1e-3: yes

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <posenc/attention_rope.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/rope_frequencies.hpp>

namespace {

constexpr Eigen::Index V = 32, DM = 64, L = 2, H = 4, KH = 2, HD = 16, FF = 128;
constexpr Eigen::Index PROMPT = 4, GEN = 8, MAX_LEN = PROMPT + GEN;

std::uint64_t g_state = 2024;  // splitmix64: the same weights with every compiler and library
float uniform() {              // [-1, 1)
  std::uint64_t z = (g_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<float>(-1.0 + 2.0 * static_cast<double>(z >> 11) * 0x1.0p-53);
}

struct Linear {  // y = x W, W [in, out] row-major
  Eigen::Index in = 0, out = 0;
  std::vector<float> w;
  Linear(Eigen::Index i, Eigen::Index o) : in(i), out(o), w(static_cast<std::size_t>(i * o)) {
    const float s = 1.0f / std::sqrt(static_cast<float>(i));
    for (auto& e : w) e = uniform() * s;
  }
  std::vector<float> operator()(const std::vector<float>& x) const {  // x [rows, in]
    const Eigen::Index rows = static_cast<Eigen::Index>(x.size()) / in;
    std::vector<float> y(static_cast<std::size_t>(rows * out), 0.0f);
    for (Eigen::Index r = 0; r < rows; ++r)
      for (Eigen::Index i = 0; i < in; ++i)
        for (Eigen::Index o = 0; o < out; ++o) y[r * out + o] += x[r * in + i] * w[i * out + o];
    return y;
  }
};

struct Layer {
  Linear wq{DM, H * HD}, wk{DM, KH * HD}, wv{DM, KH * HD}, wo{H * HD, DM};
  Linear wg{DM, FF}, wu{DM, FF}, wd{FF, DM};
};

std::vector<float> draw_embedding() {  // [V, DM], not divided by sqrt(fan_in)
  std::vector<float> e(static_cast<std::size_t>(V * DM));
  for (auto& x : e) x = uniform();
  return e;
}
std::vector<Layer> draw_layers() {
  std::vector<Layer> layers;
  for (Eigen::Index l = 0; l < L; ++l) layers.emplace_back();
  return layers;
}
posenc::RopeFrequencies plan_rope() {  // plan once, share across layers and steps
  posenc::RopeParams rp;
  rp.head_dim = HD;
  return posenc::compute_rope_frequencies(rp);
}

struct Model {  // members are drawn in declaration order: embedding, layers, head
  std::vector<float> embed = draw_embedding();
  std::vector<Layer> layers = draw_layers();
  Linear head{DM, V};
  posenc::RopeFrequencies rope = plan_rope();
};

// Causal, scale 1/sqrt(16). At namespace scope: a local default AttentionParams copied inside
// KvCache::attend trips GCC 12's -Wmaybe-uninitialized on its empty std::optional scale.
const posenc::AttentionParams causal{};

std::vector<float> rmsnorm(const std::vector<float>& x) {  // per row of DM, gain 1
  std::vector<float> y(x.size());
  for (std::size_t r = 0; r < x.size() / DM; ++r) {
    float ss = 0.0f;
    for (Eigen::Index c = 0; c < DM; ++c) ss += x[r * DM + c] * x[r * DM + c];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(DM) + 1e-5f);
    for (Eigen::Index c = 0; c < DM; ++c) y[r * DM + c] = x[r * DM + c] * inv;
  }
  return y;
}

// Logits [len, V] of `tokens`, whose first token sits at position `start`.
// caches != nullptr: append the tokens' K/V to the per-layer caches and attend against
// everything cached. caches == nullptr: `tokens` is the whole sequence (start must be 0).
std::vector<float> forward(const Model& m, const std::vector<int>& tokens, std::int64_t start,
                           std::vector<posenc::KvCache<float>>* caches) {
  using CView = posenc::ConstTensorView<float, 4>;
  using View = posenc::TensorView<float, 4>;
  const auto len = static_cast<Eigen::Index>(tokens.size());
  std::vector<float> h(static_cast<std::size_t>(len * DM));
  for (Eigen::Index s = 0; s < len; ++s)
    std::copy_n(m.embed.begin() + tokens[s] * DM, DM, h.begin() + s * DM);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(len));
  for (Eigen::Index s = 0; s < len; ++s) pos[s] = start + s;

  for (Eigen::Index l = 0; l < L; ++l) {
    const Layer& w = m.layers[l];
    auto a = rmsnorm(h);
    const auto q = w.wq(a), k = w.wk(a), v = w.wv(a);
    std::vector<float> att(q.size());
    if (caches) {
      auto& cache = (*caches)[l];
      cache.append(CView(k.data(), 1, len, KH, HD), CView(v.data(), 1, len, KH, HD),
                   posenc::PositionIdsView(pos.data(), 1, len));
      cache.attend(CView(q.data(), 1, len, H, HD), View(att.data(), 1, len, H, HD), causal);
    } else {
      posenc::attention_with_rope<float>(CView(q.data(), 1, len, H, HD), CView(k.data(), 1, len, KH, HD),
                                         CView(v.data(), 1, len, KH, HD), View(att.data(), 1, len, H, HD),
                                         m.rope, posenc::RopeLayout::kHalfSplit, causal);
    }
    const auto o = w.wo(att);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += o[i];
    a = rmsnorm(h);
    auto g = w.wg(a);
    const auto u = w.wu(a);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    const auto d = w.wd(g);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += d[i];
  }
  return m.head(rmsnorm(h));  // [len, V]
}

std::vector<float> last_row(const std::vector<float>& logits) {
  return {logits.end() - V, logits.end()};
}
int argmax(const std::vector<float>& x) {
  return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin());
}
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
  return d;
}
std::vector<posenc::KvCache<float>> make_caches(const Model& m) {
  std::vector<posenc::KvCache<float>> caches;
  for (Eigen::Index l = 0; l < L; ++l) {
    caches.emplace_back(1, MAX_LEN, KH, HD);
    caches.back().set_rope(m.rope, posenc::RopeLayout::kHalfSplit);
  }
  return caches;
}
void print_ids(const char* label, const std::vector<int>& ids) {
  std::printf("%s", label);
  for (const int t : ids) std::printf(" %d", t);
  std::printf("\n");
}

}  // namespace

int main() {
  const Model model;
  const std::vector<int> prompt = {1, 2, 3, 4};
  print_ids("prompt:", prompt);

  // (a) KV cache: the prompt in one prefill call, then one token per step at position t.
  auto caches = make_caches(model);
  std::vector<int> cached;
  std::vector<std::vector<float>> cached_logits;
  cached_logits.push_back(last_row(forward(model, prompt, 0, &caches)));
  cached.push_back(argmax(cached_logits.back()));
  for (Eigen::Index step = 1; step < GEN; ++step) {
    const std::int64_t t = caches[0].size();  // tokens cached so far = the new token's position
    cached_logits.push_back(last_row(forward(model, {cached.back()}, t, &caches)));
    cached.push_back(argmax(cached_logits.back()));
  }

  // (b) No cache: the whole sequence again at every step.
  std::vector<int> seq = prompt, recomputed;
  double worst = 0.0;
  std::printf("\nstep  last input at position  cached  recomputed  max |logit difference|\n");
  for (Eigen::Index step = 0; step < GEN; ++step) {
    const auto logits = last_row(forward(model, seq, 0, nullptr));
    recomputed.push_back(argmax(logits));
    seq.push_back(recomputed.back());
    const double diff = max_abs_diff(logits, cached_logits[step]);
    worst = std::max(worst, diff);
    std::printf("%4ld  %23ld  %6d  %10d  %.2e\n", static_cast<long>(step),
                static_cast<long>(PROMPT - 1 + step), cached[step], recomputed.back(), diff);
  }
  print_ids("\ngenerated with the KV cache:", cached);
  print_ids("generated by recomputing:   ", recomputed);
  const bool same = cached == recomputed;
  std::printf("identical: %s\n", same ? "yes" : "NO");
  std::printf("max |logit difference| over 8 steps < 1e-4: %s   (%.2e)\n", worst < 1e-4 ? "yes" : "NO", worst);

  // The bug of seed §13.3: the same tokens, but every decode token at position 0.
  auto wrong = make_caches(model);
  double wrong_diff = max_abs_diff(last_row(forward(model, prompt, 0, &wrong)), cached_logits[0]);
  for (Eigen::Index step = 1; step < GEN; ++step) {
    const auto logits = last_row(forward(model, {cached[step - 1]}, 0, &wrong));
    wrong_diff = std::max(wrong_diff, max_abs_diff(logits, cached_logits[step]));
  }
  std::printf("decode at position 0 instead: max |logit difference| > 1e-3: %s   (%.2e)\n",
              wrong_diff > 1e-3 ? "yes" : "NO", wrong_diff);
  return same && worst < 1e-4 && wrong_diff > 1e-3 ? 0 : 1;
}
