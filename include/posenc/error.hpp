#pragma once
/// \file posenc/error.hpp
/// posenc reports bad input with exceptions whose message names the function, the parameter,
/// the value and the limit, e.g.
///   "posenc::add_sinusoidal_inplace: d_model = 7 must be even".
/// std::invalid_argument for shapes and parameters, std::out_of_range for positions outside a
/// table or a cache. Every public function validates all of its input before the first write.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "posenc/detail/fast_math_guard.hpp"

#ifndef POSENC_ASSERT
#include <Eigen/Core>
/// Internal invariant (never user input); overridable like {fmt}'s FMT_ASSERT.
#define POSENC_ASSERT(cond) eigen_assert(cond)
#endif

namespace posenc::detail {

template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  out.precision(std::numeric_limits<double>::max_digits10);
  (out << ... << parts);
  return out.str();
}

/// Throws std::invalid_argument("posenc::<function>: <parts...>").
template <typename... Parts>
[[noreturn]] void throw_invalid_argument(std::string_view function, const Parts&... parts) {
  throw std::invalid_argument(concat("posenc::", function, ": ", parts...));
}

/// Throws std::out_of_range("posenc::<function>: <parts...>").
template <typename... Parts>
[[noreturn]] void throw_out_of_range(std::string_view function, const Parts&... parts) {
  throw std::out_of_range(concat("posenc::", function, ": ", parts...));
}

/// Checks a condition on user input; throws std::invalid_argument with the message otherwise.
template <typename... Parts>
void require(bool condition, std::string_view function, const Parts&... parts) {
  if (!condition) throw_invalid_argument(function, parts...);
}

/// Whether a buffer of these extents (each >= 0) of element_bytes-byte elements fits PTRDIFF_MAX
/// bytes; its element count in *elements when it does. A product of caller sizes in Index
/// wraps silently (a cache of 2^32 x 2^32 slots came out with no storage at all).
inline bool addressable(const Eigen::Index* extents, std::size_t rank, std::size_t element_bytes,
                        std::size_t* elements) {
  const auto limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) /
                     element_bytes;
  std::size_t n = 1;
  for (std::size_t a = 0; a < rank; ++a) {
    const auto u = static_cast<std::size_t>(extents[a]);
    if (extents[a] < 0 || (u != 0 && n > limit / u)) return false;
    n *= u;
  }
  *elements = n;
  return true;
}

/// Whether two byte ranges share a byte.
inline bool bytes_overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

/// The element count of a buffer with these extents, checked by addressable() first.
inline std::size_t checked_elements(std::string_view function, std::string_view what,
                                    std::initializer_list<Eigen::Index> extents,
                                    std::size_t element_bytes) {
  std::size_t n = 0;
  if (!addressable(extents.begin(), extents.size(), element_bytes, &n)) {
    std::string dims;
    for (const Eigen::Index e : extents) dims += (dims.empty() ? "" : " x ") + std::to_string(e);
    throw_invalid_argument(function, what, " of ", dims, " elements of ", element_bytes,
                           " bytes exceeds the addressable size (PTRDIFF_MAX bytes)");
  }
  return n;
}

}  // namespace posenc::detail
