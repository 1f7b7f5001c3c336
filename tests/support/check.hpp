#pragma once
// Element-wise comparison with an llm.c check_tensor-style report: the first mismatches with
// their indices and both values, and the max abs difference.

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>

namespace posenc_test {

struct CloseReport {
  bool ok = true;
  double max_abs_diff = 0.0;
  std::size_t mismatches = 0;
  std::string detail;
};

/// Compares n elements given by actual(i), expected(i) (both convertible to double):
/// |a - e| <= abs_tol + rel_tol * |e|. NaN anywhere is a mismatch.
template <typename Actual, typename Expected>
CloseReport compare(std::size_t n, Actual actual, Expected expected, double abs_tol,
                    double rel_tol = 0.0) {
  CloseReport r;
  std::ostringstream out;
  out.precision(10);
  for (std::size_t i = 0; i < n; ++i) {
    const double a = static_cast<double>(actual(i));
    const double e = static_cast<double>(expected(i));
    const double diff = std::abs(a - e);
    if (std::isnan(diff) || diff > abs_tol + rel_tol * std::abs(e)) {
      if (r.mismatches < 5) out << "  [" << i << "] got " << a << " want " << e << " (diff " << diff << ")\n";
      ++r.mismatches;
      r.ok = false;
    }
    if (!std::isnan(diff) && diff > r.max_abs_diff) r.max_abs_diff = diff;
  }
  std::ostringstream head;
  head << r.mismatches << " of " << n << " mismatch (abs_tol " << abs_tol << ", rel_tol " << rel_tol
       << "), max abs diff " << r.max_abs_diff << "\n";
  r.detail = head.str() + out.str();
  return r;
}

}  // namespace posenc_test

// Usage: CHECK_CLOSE_REPORT(posenc_test::compare(...)); prints the report on failure.
#define POSENC_REQUIRE_CLOSE(report_expr)       \
  do {                                          \
    const auto posenc_report_ = (report_expr);  \
    INFO(posenc_report_.detail);                \
    REQUIRE(posenc_report_.ok);                 \
  } while (0)
