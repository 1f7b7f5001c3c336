#pragma once
/// \file posenc/reference/sine_embedding_2d.hpp
/// Obviously-correct long-double DETR sine embedding: HF DetrSinePositionEmbedding's steps one
/// by one (the two cumulative sums of the mask as whole arrays, the normalisation by their last
/// row / column, dim_t[c] = T^(2 floor(c / 2) / F), sin on even and cos on odd channels, the
/// two blocks concatenated), per element, without the kernel's copies between neighbours.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "posenc/sine_embedding_2d.hpp"

namespace posenc::reference {

/// The coordinates (y, x) of every token [batch, h, w] of the mask (nonzero = real pixel).
struct SineCoordinates {
  std::vector<long double> y, x;
};

inline SineCoordinates sine_coordinates_2d(const std::vector<std::uint8_t>& mask,
                                           Eigen::Index batch, Eigen::Index h, Eigen::Index w,
                                           const SineEmbedding2dParams& p) {
  const auto at = [&](Eigen::Index b, Eigen::Index i, Eigen::Index j) {
    return static_cast<std::size_t>((b * h + i) * w + j);
  };
  std::vector<long double> y_embed(mask.size()), x_embed(mask.size());
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index i = 0; i < h; ++i) {
      for (Eigen::Index j = 0; j < w; ++j) {
        const long double m = mask[at(b, i, j)] != 0 ? 1.0L : 0.0L;
        y_embed[at(b, i, j)] = m + (i > 0 ? y_embed[at(b, i - 1, j)] : 0.0L);
        x_embed[at(b, i, j)] = m + (j > 0 ? x_embed[at(b, i, j - 1)] : 0.0L);
      }
    }
  }
  if (!p.normalize) return {y_embed, x_embed};
  const long double off = static_cast<long double>(p.offset), eps = static_cast<long double>(p.eps),
                    scale = static_cast<long double>(p.scale);
  std::vector<long double> y = y_embed, x = x_embed;
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index i = 0; i < h; ++i) {
      for (Eigen::Index j = 0; j < w; ++j) {
        y[at(b, i, j)] = (y_embed[at(b, i, j)] - off) / (y_embed[at(b, h - 1, j)] + eps) * scale;
        x[at(b, i, j)] = (x_embed[at(b, i, j)] - off) / (x_embed[at(b, i, w - 1)] + eps) * scale;
      }
    }
  }
  return {y, x};
}

/// [batch, h, w, 2F] values of the mask [batch, h, w] (nonzero = real pixel), in long double.
inline std::vector<long double> sine_embedding_2d(const std::vector<std::uint8_t>& mask,
                                                  Eigen::Index batch, Eigen::Index h,
                                                  Eigen::Index w, const SineEmbedding2dParams& p) {
  const SineCoordinates coords = sine_coordinates_2d(mask, batch, h, w, p);
  const std::vector<long double>& y_embed = coords.y;
  const std::vector<long double>& x_embed = coords.x;
  const Eigen::Index f = p.num_pos_feats;
  const auto dim_t = [&](double temperature, Eigen::Index c) {
    return std::pow(static_cast<long double>(temperature),
                    2.0L * static_cast<long double>(c / 2) / static_cast<long double>(f));
  };
  const Eigen::Index y_first = p.order == SineAxisOrder::kYX ? 0 : f;
  const Eigen::Index x_first = f - y_first;
  std::vector<long double> out(mask.size() * static_cast<std::size_t>(2 * f));
  for (std::size_t t = 0; t < mask.size(); ++t) {
    for (Eigen::Index c = 0; c < f; ++c) {
      const long double py = y_embed[t] / dim_t(p.temperature_height, c);
      const long double px = x_embed[t] / dim_t(p.temperature_width, c);
      const auto row = t * static_cast<std::size_t>(2 * f);
      out[row + static_cast<std::size_t>(y_first + c)] = c % 2 == 0 ? std::sin(py) : std::cos(py);
      out[row + static_cast<std::size_t>(x_first + c)] = c % 2 == 0 ? std::sin(px) : std::cos(px);
    }
  }
  return out;
}

}  // namespace posenc::reference
