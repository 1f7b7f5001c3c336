#pragma once
// The sizes of one attention problem, shared by the attention tests.

#include <Eigen/Core>

#include <ostream>

namespace posenc_test {

/// Q [batch, q_len, heads, d], K / V [batch, k_len, kv_heads, d]; prints as its constructor
/// call in Catch's CAPTURE.
struct Shape {
  Eigen::Index batch, q_len, k_len, heads, kv_heads, d;
};
inline std::ostream& operator<<(std::ostream& os, const Shape& s) {
  return os << "Shape{" << s.batch << ", " << s.q_len << ", " << s.k_len << ", " << s.heads
            << ", " << s.kv_heads << ", " << s.d << "}";
}

}  // namespace posenc_test
