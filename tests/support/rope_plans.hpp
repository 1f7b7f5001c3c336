#pragma once
// Plans and tolerances shared by the re-rotation tests (tests/test_rope.cpp, test_kv_cache.cpp).

#include <posenc/detail/numeric.hpp>
#include <posenc/rope_frequencies.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace posenc_test {

struct PlanChange {
  posenc::RopeFrequencies from, to;
};

/// The dynamic-NTK plan of a head_dim-wide head before and after the sequence grows to seq_len
/// (past max_position_embeddings, so the plan changes).
inline PlanChange dynamic_plan_change(Eigen::Index head_dim, Eigen::Index max_position_embeddings,
                                      double factor, Eigen::Index seq_len) {
  posenc::RopeParams p;
  p.head_dim = head_dim;
  p.max_position_embeddings = max_position_embeddings;
  p.scaling.type = posenc::RopeScalingType::kDynamic;
  p.scaling.factor = factor;
  posenc::RopePlan plan(p);
  PlanChange change{plan.frequencies(), {}};
  REQUIRE(plan.update(seq_len));
  change.to = plan.frequencies();
  return change;
}

/// A LongRoPE (Phi-3) plan of a head_dim-wide head before and after the sequence passes
/// original_max_position_embeddings: short factors all 1, long factors 1, 1.5, 2, ... (so every
/// pair but the first turns slower), and the attention factor of max / L0 = 4 in both.
inline PlanChange longrope_plan_change(Eigen::Index head_dim, Eigen::Index original,
                                       Eigen::Index seq_len) {
  posenc::RopeParams p;
  p.head_dim = head_dim;
  p.max_position_embeddings = 4 * original;
  p.scaling.type = posenc::RopeScalingType::kLongRope;
  p.scaling.original_max_position_embeddings = original;
  for (Eigen::Index j = 0; j < head_dim / 2; ++j) {
    p.scaling.short_factor.push_back(1.0);
    p.scaling.long_factor.push_back(1.0 + 0.5 * static_cast<double>(j));
  }
  posenc::RopePlan plan(p);
  PlanChange change{plan.frequencies(), {}};
  REQUIRE(plan.update(seq_len));
  change.to = plan.frequencies();
  REQUIRE(change.to.uses_long_factor);
  REQUIRE(change.to.attention_factor == change.from.attention_factor);
  REQUIRE(change.to.attention_factor > 1.0);
  return change;
}

/// How far a value rotated and rounded once to T may be from the exact (long double) one:
/// half an ulp of T (7 or 10 fraction bits; half's subnormal spacing 2^-24) plus the float
/// arithmetic's error, which cancellation leaves relative to the inputs' magnitude
/// (inputs_scale = |x1| + |x2| times the cos / sin multiplier). Rounding twice exceeds it.
template <typename T>
double rounded_once_tolerance(long double expected, long double inputs_scale) {
  if constexpr (std::is_same_v<T, double>) {
    return 1e-12;
  } else if constexpr (std::is_same_v<T, float>) {
    return 1e-6;
  } else {
    const int bits = std::is_same_v<T, Eigen::bfloat16> ? 7 : 10;
    const double magnitude = std::max(static_cast<double>(std::fabs(expected)), 0x1p-126);  // ilogb(0) is INT_MIN
    const double ulp = std::max(std::ldexp(1.0, std::ilogb(magnitude) - bits), bits == 10 ? 0x1p-24 : 0.0);
    return 0.5 * ulp + 4.0 * 0x1p-24 * static_cast<double>(inputs_scale);
  }
}

}  // namespace posenc_test
