#pragma once
// Deterministic inputs: std distributions differ between standard libraries, so tests draw from
// splitmix64 (Steele, Lea, Flood 2014) and map to floats themselves.

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace posenc_test {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0; }
  /// Uniform integer in [lo, hi].
  std::int64_t integer(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }

 private:
  std::uint64_t state_;
};

/// True with probability p.
inline bool coin(SplitMix64& rng, double p) { return 0.5 * (rng.uniform() + 1.0) < p; }

/// Uniform in [lo, hi).
inline double between(SplitMix64& rng, double lo, double hi) {
  return lo + (hi - lo) * 0.5 * (rng.uniform() + 1.0);
}

/// One of xs, each equally likely.
template <typename T>
T pick(SplitMix64& rng, std::initializer_list<T> xs) {
  return *(xs.begin() + rng.integer(0, static_cast<std::int64_t>(xs.size()) - 1));
}

/// n values uniform in [-1, 1), stored as T.
template <typename T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = T(static_cast<float>(rng.uniform()));
  return v;
}

}  // namespace posenc_test
