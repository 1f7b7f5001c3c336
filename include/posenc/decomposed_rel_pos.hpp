#pragma once
/// \file posenc/decomposed_rel_pos.hpp
/// Decomposed relative positions of MViTv2 (Li et al. 2022, §4.1, Eq. 3), used by Segment
/// Anything's image encoder and ViTDet: a query at (qy, qx) of a q_h x q_w grid and a key at
/// (ky, kx) of a k_h x k_w grid get a bias that depends on the query itself,
///
///   B[(qy, qx), (ky, kx)] = q . R_h[r_h(qy, ky)] + q . R_w[r_w(qx, kx)]
///   r(i, j) = trunc(i max(k / q, 1) - j max(q / k, 1) + (k - 1) max(q / k, 1))   per axis
///
/// (q the unscaled query of that head; R_h: [2 max(q_h, k_h) - 1, head_dim], one table per
/// axis shared by the heads), added to scale q.k before the softmax. With q_h = k_h the row is
/// qy - ky + k_h - 1: the table's middle row is offset 0. A query needs k_h + k_w dot products
/// (one per key row and one per key column), then one add per score: HF SamVisionAttention.
/// get_decomposed_rel_pos (rel_h[..., :, None] + rel_w[..., None, :]), ggml's ggml_get_rel_pos /
/// ggml_add_rel_pos.
///
/// decomposed_rel_pos_bias materialises [batch, heads, query rows, k_h k_w] for
/// AttentionMetadata::attention_bias (MaskMode::kBidirectional). A global layer of SAM ViT-B
/// (64 x 64 tokens, 12 heads) would need 805 MB for every query at once: pass a slice of query
/// rows (query_offset) and attend in chunks; a windowed layer (14 x 14 windows,
/// swin_partition_windows with shift 0) is 12 x 196^2 floats per window. Tables trained for
/// another size are resized by linear interpolation, align_corners false (HF / SAM
/// F.interpolate(mode="linear") to 2 max(q, k) - 1 rows): resize_rel_pos_table.

#include <algorithm>
#include <cmath>
#include <string_view>

#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/learned_grid.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// The query and key grids of one attention call.
struct RelPosGrid {
  Eigen::Index q_h = 0, q_w = 0;  ///< query grid; each in [1, 2^15]
  Eigen::Index k_h = 0, k_w = 0;  ///< key grid; each in [1, 2^15]
};

namespace detail {

inline constexpr Eigen::Index kMaxRelPosSide = Eigen::Index{1} << 15;

inline void validate_rel_pos_grid(std::string_view fn, const RelPosGrid& g) {
  for (const Eigen::Index side : {g.q_h, g.q_w, g.k_h, g.k_w}) {
    require(side >= 1 && side <= kMaxRelPosSide, fn, "grid q ", g.q_h, " x ", g.q_w, ", k ", g.k_h,
            " x ", g.k_w, ": every side must be in [1, 2^15]");
  }
}

/// 2 max(q, k) - 1: the rows of one axis's table.
inline Eigen::Index rel_pos_rows(Eigen::Index q, Eigen::Index k) { return 2 * std::max(q, k) - 1; }

/// r(i, j) of the file comment in float, as torch computes it (arange * python float is
/// float32; the offset (k - 1) max(q / k, 1) is a double rounded on the add).
inline Eigen::Index rel_pos_row(Eigen::Index i, Eigen::Index j, Eigen::Index q, Eigen::Index k) {
  const double qk = std::max(static_cast<double>(k) / static_cast<double>(q), 1.0);
  const double kq = std::max(static_cast<double>(q) / static_cast<double>(k), 1.0);
  const float qc = static_cast<float>(i) * static_cast<float>(qk);
  const float kc = static_cast<float>(j) * static_cast<float>(kq);
  const float r = (qc - kc) + static_cast<float>(static_cast<double>(k - 1) * kq);
  return static_cast<Eigen::Index>(r);
}

}  // namespace detail

/// \brief Rows a table of one axis must have for q_size queries and k_size keys on it:
/// 2 max(q_size, k_size) - 1. Throws std::invalid_argument for a size outside [1, 2^15].
inline Eigen::Index rel_pos_table_rows(Eigen::Index q_size, Eigen::Index k_size) {
  detail::require(q_size >= 1 && q_size <= detail::kMaxRelPosSide && k_size >= 1 &&
                      k_size <= detail::kMaxRelPosSide,
                  "rel_pos_table_rows", "q_size = ", q_size, ", k_size = ", k_size,
                  " must be in [1, 2^15]");
  return detail::rel_pos_rows(q_size, k_size);
}

/// \brief A table trained with `table.dimension(0)` rows resampled to out's rows by linear
/// interpolation, align_corners false (torch F.interpolate(mode="linear"), as SAM / HF do when
/// a layer's grid differs from the checkpoint's). table: [rows, head_dim]; out: [new_rows,
/// head_dim]; out must not alias table. Throws std::invalid_argument (shapes) before writing.
template <typename T>
void resize_rel_pos_table(ConstTensorView<T, 2> table, TensorView<T, 2> out) {
  constexpr std::string_view fn = "resize_rel_pos_table";
  detail::require(table.dimension(0) >= 1 && table.dimension(1) >= 1, fn, "table shape [",
                  table.dimension(0), ", ", table.dimension(1),
                  "] must be [rows >= 1, head_dim >= 1]");
  detail::require(out.dimension(0) >= 1 && out.dimension(1) == table.dimension(1), fn,
                  "out shape [", out.dimension(0), ", ", out.dimension(1),
                  "] must be [rows >= 1, head_dim = ", table.dimension(1), "]");
  // A column of rows x 1 cells: bilinear with one column is linear along the rows.
  resize_learned_grid<T>(table, table.dimension(0), 1, out, out.dimension(0), 1,
                         GridResize{GridInterpolation::kBilinear, false});
}

/// \brief The decomposed relative-position bias of the file comment for query rows
/// [query_offset, query_offset + q.dimension(1)) of the q_h x q_w grid (row-major tokens).
/// q: [batch, query rows, heads, head_dim] (BSHD; the unscaled queries); rel_pos_h:
/// [2 max(q_h, k_h) - 1, head_dim], rel_pos_w: [2 max(q_w, k_w) - 1, head_dim] (resize a
/// checkpoint's tables for other grids with resize_rel_pos_table); out: [batch, heads, query
/// rows, k_h k_w], for AttentionMetadata::attention_bias of the call over those query rows.
/// Each term is its dot product in double rounded to float, and the two are added in float, as
/// torch adds its two float32 einsums.
/// Throws std::invalid_argument (grid, shapes, query rows past the grid, non-finite tables)
/// before writing anything.
template <typename T, typename TableT>
void decomposed_rel_pos_bias(ConstTensorView<T, 4> q, ConstTensorView<TableT, 2> rel_pos_h,
                             ConstTensorView<TableT, 2> rel_pos_w, const RelPosGrid& grid,
                             TensorView<float, 4> out, Eigen::Index query_offset = 0) {
  static_assert(detail::is_storage_type_v<T>, "posenc: q must be float, double, half or bfloat16");
  static_assert(detail::is_storage_type_v<TableT>,
                "posenc: the tables must be float, double, half or bfloat16");
  constexpr std::string_view fn = "decomposed_rel_pos_bias";
  detail::validate_rel_pos_grid(fn, grid);
  const Eigen::Index batch = q.dimension(0), rows = q.dimension(1), heads = q.dimension(2),
                     d = q.dimension(3);
  detail::require(heads >= 1 && d >= 1, fn, "q shape [", batch, ", ", rows, ", ", heads, ", ", d,
                  "] must have heads >= 1 and head_dim >= 1");
  const Eigen::Index tokens = grid.q_h * grid.q_w, keys = grid.k_h * grid.k_w;
  detail::require(query_offset >= 0 && rows <= tokens && query_offset <= tokens - rows, fn,
                  "query rows [", query_offset, ", ", query_offset, " + ", rows,
                  ") must lie in the ", grid.q_h, " x ", grid.q_w, " grid's ", tokens, " tokens");
  const Eigen::Index rows_h = detail::rel_pos_rows(grid.q_h, grid.k_h),
                     rows_w = detail::rel_pos_rows(grid.q_w, grid.k_w);
  detail::require(rel_pos_h.dimension(0) == rows_h && rel_pos_h.dimension(1) == d, fn,
                  "rel_pos_h shape [", rel_pos_h.dimension(0), ", ", rel_pos_h.dimension(1),
                  "] must be [2 max(q_h, k_h) - 1, head_dim] = [", rows_h, ", ", d,
                  "] (resize_rel_pos_table resamples a checkpoint's)");
  detail::require(rel_pos_w.dimension(0) == rows_w && rel_pos_w.dimension(1) == d, fn,
                  "rel_pos_w shape [", rel_pos_w.dimension(0), ", ", rel_pos_w.dimension(1),
                  "] must be [2 max(q_w, k_w) - 1, head_dim] = [", rows_w, ", ", d,
                  "] (resize_rel_pos_table resamples a checkpoint's)");
  detail::require(out.dimension(0) == batch && out.dimension(1) == heads &&
                      out.dimension(2) == rows && out.dimension(3) == keys,
                  fn, "out shape [", out.dimension(0), ", ", out.dimension(1), ", ",
                  out.dimension(2), ", ", out.dimension(3),
                  "] must be [batch, heads, query rows, k_h k_w] = [", batch, ", ", heads, ", ",
                  rows, ", ", keys, "]");
  detail::require_view(fn, "q", q);
  detail::require_view(fn, "rel_pos_h", rel_pos_h);
  detail::require_view(fn, "rel_pos_w", rel_pos_w);
  detail::require_view(fn, "out", out);
  for (const auto* table : {&rel_pos_h, &rel_pos_w}) {
    const TableT* p = table->data();
    for (Eigen::Index e = 0; e < table->size(); ++e) {
      detail::require(std::isfinite(detail::to_double(p[e])), fn,
                      table == &rel_pos_h ? "rel_pos_h" : "rel_pos_w", "[", e / d, ", ", e % d,
                      "] = ", detail::to_double(p[e]), " must be finite");
    }
  }

  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index h = 0; h < heads; ++h) {
      for (Eigen::Index t = 0; t < rows; ++t) {
        const Eigen::Index token = query_offset + t, qy = token / grid.q_w, qx = token % grid.q_w;
        float* o = &out(b, h, t, 0);
        // rel_w[kx] first, in the row's first k_w entries; rel_h[ky] is added per key row.
        for (Eigen::Index kx = 0; kx < grid.k_w; ++kx) {
          const Eigen::Index r = detail::rel_pos_row(qx, kx, grid.q_w, grid.k_w);
          double s = 0.0;
          for (Eigen::Index c = 0; c < d; ++c) {
            s += detail::to_double(q(b, t, h, c)) * detail::to_double(rel_pos_w(r, c));
          }
          o[kx] = static_cast<float>(s);
        }
        for (Eigen::Index ky = grid.k_h - 1; ky >= 0; --ky) {
          const Eigen::Index r = detail::rel_pos_row(qy, ky, grid.q_h, grid.k_h);
          double s = 0.0;
          for (Eigen::Index c = 0; c < d; ++c) {
            s += detail::to_double(q(b, t, h, c)) * detail::to_double(rel_pos_h(r, c));
          }
          // Key row 0 last: it overwrites the rel_w values it reads.
          for (Eigen::Index kx = 0; kx < grid.k_w; ++kx) {
            o[ky * grid.k_w + kx] = static_cast<float>(s) + o[kx];
          }
        }
      }
    }
  }
}

}  // namespace posenc
