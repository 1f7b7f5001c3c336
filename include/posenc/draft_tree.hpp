#pragma once
/// \file posenc/draft_tree.hpp
/// A speculative-decoding draft tree as engines hold it — one parent index per draft token
/// (EAGLE / Medusa tree buffers) — turned into what tree attention takes
/// (AttentionMetadata::tree_mask, KvCache::attend(q, out, tree_mask)): the ancestor mask and the
/// positions by depth.
///
///   prefix ... p-1 |  draft 0  1  2  3        parents  -1  0  -1  2
///                  |                          depth     0  1   0  1
///   positions          p  p+1  p  p+1         mask row 3 (token 3): 0 0 1 1
///
/// A parent of -1 is the prefix's last token. Every token must come after its parent
/// (parents[t] < t), the order the tree mask requires.

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/attention_types.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

namespace detail {

inline void validate_draft_parents(std::string_view fn, const std::vector<std::int64_t>& parents) {
  for (std::size_t t = 0; t < parents.size(); ++t) {
    require(parents[t] >= -1 && parents[t] < static_cast<std::int64_t>(t), fn, "parents[", t,
            "] = ", parents[t], " must be in [-1, ", t,
            "): -1 for a child of the prefix, else an earlier draft token");
  }
}

}  // namespace detail

/// \brief mask[i, t] = 1 when draft token t is draft token i or one of its ancestors, else 0.
/// mask: [T, T] with T = parents.size() (one sequence's block of a tree_mask).
/// Throws std::invalid_argument (a parent not in [-1, t), mask's shape) before writing anything.
inline void draft_tree_mask(const std::vector<std::int64_t>& parents, TensorView<std::uint8_t, 2> mask) {
  constexpr std::string_view fn = "draft_tree_mask";
  detail::validate_draft_parents(fn, parents);
  const auto n = static_cast<Eigen::Index>(parents.size());
  detail::require(mask.dimension(0) == n && mask.dimension(1) == n, fn, "mask shape [",
                  mask.dimension(0), ", ", mask.dimension(1), "] must be [T, T] = [", n, ", ", n,
                  "] (T = parents.size())");
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index t = 0; t < n; ++t) mask(i, t) = 0;
    for (std::int64_t a = i; a >= 0; a = parents[static_cast<std::size_t>(a)]) {
      mask(i, static_cast<Eigen::Index>(a)) = 1;
    }
  }
}

/// \brief positions[t] = first_position + depth(t), depth 0 for a child of the prefix: the
/// position each draft token would have in the sequence of its own path (first_position = the
/// prefix's length when positions count from 0).
/// positions: [T]. Throws std::invalid_argument (a parent not in [-1, t), the shape,
/// first_position outside [0, 2^53 - T]) before writing anything.
inline void draft_tree_positions(const std::vector<std::int64_t>& parents, std::int64_t first_position,
                                 TensorView<std::int64_t, 1> positions) {
  constexpr std::string_view fn = "draft_tree_positions";
  detail::validate_draft_parents(fn, parents);
  const auto n = static_cast<Eigen::Index>(parents.size());
  detail::require(positions.dimension(0) == n, fn, "positions has ", positions.dimension(0),
                  " entries; it must have T = parents.size() = ", n);
  detail::require(first_position >= 0 && first_position <= detail::kMaxAttentionPosition - n, fn,
                  "first_position = ", first_position, " must be in [0, 2^53 - T]");
  for (Eigen::Index t = 0; t < n; ++t) {
    const std::int64_t parent = parents[static_cast<std::size_t>(t)];
    positions(t) = parent < 0 ? first_position : positions(static_cast<Eigen::Index>(parent)) + 1;
  }
}

}  // namespace posenc
