// A paged KV cache by hand: pages of 2 tokens in a pool of 4, one sequence forked from another
// (parallel sampling from one prompt), both attended in one call, then released.
//
//   a = 3 tokens, logits [1, 0, 2]    pages {0, 1}   (page 1 holds token 2 and a free row)
//   c = fork(a)                       pages {0, 2}   (page 0 shared; page 1 copied to page 2,
//                                                     so each sequence writes only its own)
//   a gets logit -1, c gets logit 3   (slot 3: row 1 of page 1 for a, of page 2 for c)
//
//   a: softmax([1, 0, 2, -1]) = [e, 1, e^2, e^-1] / 11.4752 = [0.2369, 0.0871, 0.6439, 0.0321]
//   c: softmax([1, 0, 2, 3])  = [e, 1, e^2, e^3]  / 31.1929 = [0.0871, 0.0321, 0.2369, 0.6439]
//
// q = e_0, k_j = s_j e_0 and scale 1 make the logits s_j; V rows e_j make each output row the
// weights themselves. Pages are handed out lowest id first.
//
// expect: a: pages {0, 1}, 2 of 4 pages free
// expect: c = fork(a): pages {0, 2}, page 0 held by 2 sequences, 1 of 4 pages free
// expect: a: weights [0.2369, 0.0871, 0.6439, 0.0321]
// expect: c: weights [0.0871, 0.0321, 0.2369, 0.6439]
// expect: release(a): 2 of 4 pages free (page 0 still held by c)
// expect: release(c): 4 of 4 pages free

#include <posenc/paged_kv_cache.hpp>

#include <cstdio>
#include <vector>

namespace {

constexpr Eigen::Index d = 4;

void print_pages(const char* what, const posenc::PagedKvCache<float>& cache, std::int64_t s) {
  const auto& p = cache.pages(s);
  std::printf("%s: pages {%d, %d}", what, p[0], p[1]);
}

}  // namespace

int main() {
  posenc::PagedKvCache<float> cache(/*num_pages=*/4, /*page_size=*/2, /*kv_heads=*/1, d);
  // Token j of logit s: k = s e_0, v = e_slot.
  auto append = [&](std::int64_t seq, float logit) {
    std::vector<float> k(d, 0.0f), v(d, 0.0f);
    k[0] = logit;
    v[static_cast<std::size_t>(cache.length(seq))] = 1.0f;
    cache.append(seq, posenc::ConstTensorView<float, 3>(k.data(), 1, 1, d),
                 posenc::ConstTensorView<float, 3>(v.data(), 1, 1, d));
  };
  const std::int64_t a = cache.add_sequence();
  for (const float s : {1.0f, 0.0f, 2.0f}) append(a, s);
  print_pages("a", cache, a);
  std::printf(", %ld of 4 pages free\n", static_cast<long>(cache.free_pages()));

  const std::int64_t c = cache.fork(a);
  print_pages("c = fork(a)", cache, c);
  std::printf(", page 0 held by %d sequences, %ld of 4 pages free\n", cache.page_refs(0),
              static_cast<long>(cache.free_pages()));
  append(a, -1.0f);
  append(c, 3.0f);

  std::vector<float> q(2 * d, 0.0f), out(2 * d);
  q[0] = q[d] = 1.0f;
  posenc::AttentionParams params;
  params.scale = 1.0;
  cache.attend({a, c}, posenc::ConstTensorView<float, 4>(q.data(), 2, 1, 1, d),
               posenc::TensorView<float, 4>(out.data(), 2, 1, 1, d), params);
  for (int b = 0; b < 2; ++b) {
    const float* w = out.data() + b * d;
    std::printf("%s: weights [%.4f, %.4f, %.4f, %.4f]\n", b == 0 ? "a" : "c",
                static_cast<double>(w[0]), static_cast<double>(w[1]), static_cast<double>(w[2]),
                static_cast<double>(w[3]));
  }

  cache.release(a);
  std::printf("release(a): %ld of 4 pages free (page 0 still held by c)\n",
              static_cast<long>(cache.free_pages()));
  cache.release(c);
  std::printf("release(c): %ld of 4 pages free\n", static_cast<long>(cache.free_pages()));
  return 0;
}
