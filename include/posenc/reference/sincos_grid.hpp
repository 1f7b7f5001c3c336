#pragma once
/// \file posenc/reference/sincos_grid.hpp
/// Obviously-correct long-double sin-cos grid embeddings: each element straight from the
/// formula of posenc/sincos_grid.hpp (token -> axis indices by division, channel -> block),
/// without the plan's per-axis rows.

#include <cmath>
#include <cstddef>
#include <vector>

#include "posenc/sincos_grid.hpp"

namespace posenc::reference {

/// Row `token` (extra rows included), channel `channel` of the table, in long double.
inline long double sincos_grid_value(const SincosGridParams& params, Eigen::Index token,
                                     Eigen::Index channel) {
  if (token < params.extra_tokens) return 0.0L;
  Eigen::Index rest = token - params.extra_tokens;
  std::vector<Eigen::Index> index(params.axes.size());
  for (std::size_t a = params.axes.size(); a-- > 0;) {
    index[a] = rest % params.axes[a].size;
    rest /= params.axes[a].size;
  }
  for (const SincosGridBlock& block : params.blocks) {
    if (channel >= block.width) {
      channel -= block.width;
      continue;
    }
    const SincosGridAxis& axis = params.axes[static_cast<std::size_t>(block.axis)];
    const auto i = static_cast<std::size_t>(block.axis);
    const long double x = static_cast<long double>(axis.first + index[i]) *
                          static_cast<long double>(axis.scale);
    const Eigen::Index m = block.width / 2;
    const Eigen::Index j = channel % m;
    const long double w = std::pow(static_cast<long double>(params.base),
                                   -static_cast<long double>(j) / static_cast<long double>(m));
    return channel < m ? std::sin(x * w) : std::cos(x * w);
  }
  return 0.0L;  // past the last block: not a channel of this grid
}

}  // namespace posenc::reference
