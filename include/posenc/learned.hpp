#pragma once
/// \file posenc/learned.hpp
/// Learned absolute position embeddings (GPT-2 `wpe`, BERT, OPT): a trained table P of shape
/// [max_positions, d_model] and h[b, s] = e[b, s] + P[position_ids[b, s] + position_offset].
///
/// The table has a hard length limit. A position past it has no trained row, so posenc throws
/// std::out_of_range rather than clamping or wrapping. OPT stores two extra leading rows and
/// looks up position + 2 (position_offset = 2).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// How extend_learned_table fills the rows it adds. None of them is trained: extending the
/// storage lets longer inputs run, it does not teach the model positions it never saw; quality
/// past the trained length needs fine-tuning.
enum class LearnedExtendInit : std::uint8_t {
  kZeros = 0,       ///< new rows are 0: positions past the limit carry no position signal
  kRepeatLast = 1,  ///< new rows copy the last trained row
  kCyclic = 2,      ///< new row r copies trained row r mod max_positions (a common warm start)
};

constexpr std::string_view to_string(LearnedExtendInit init) noexcept {
  switch (init) {
    case LearnedExtendInit::kZeros: return "zeros";
    case LearnedExtendInit::kRepeatLast: return "repeat_last";
    case LearnedExtendInit::kCyclic: return "cyclic";
  }
  return "unknown";
}

namespace detail {

/// Throws std::out_of_range for the first position whose row is outside [0, max_positions),
/// std::invalid_argument for |position_offset| or max_positions past 2^53.
inline void validate_learned_positions(std::string_view function, PositionIdsView position_ids,
                                       Eigen::Index max_positions,
                                       std::int64_t position_offset) {
  // Positions are counted in [0, 2^53] everywhere in posenc; the bound also keeps -offset and
  // max_positions - offset below from overflowing (an offset near INT64_MIN did).
  constexpr std::int64_t limit = std::int64_t{1} << 53;
  require(position_offset >= -limit && position_offset <= limit, function, "position_offset = ",
          position_offset, " must be in [-2^53, 2^53]");
  require(max_positions <= limit, function, "max_positions = ", max_positions,
          " must be <= 2^53");
  for (Eigen::Index b = 0; b < position_ids.dimension(0); ++b) {
    for (Eigen::Index s = 0; s < position_ids.dimension(1); ++s) {
      const std::int64_t p = position_ids(b, s);
      // Overflow-free form of 0 <= p + offset < max_positions.
      const bool inside = p >= -position_offset && p < max_positions - position_offset;
      if (!inside) {
        throw_out_of_range(function, "position_ids[", b, ", ", s, "] = ", p,
                           " (+ position_offset ", position_offset,
                           ") is outside the learned table of max_positions = ", max_positions,
                           " rows: valid positions are [", -position_offset, ", ",
                           max_positions - position_offset, ")");
      }
    }
  }
}

template <typename T>
void validate_learned_shapes(std::string_view function, Eigen::Index table_rows,
                             Eigen::Index table_dim, Eigen::Index batch, Eigen::Index seq,
                             Eigen::Index d, PositionIdsView position_ids) {
  static_assert(is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                      "Eigen::half or Eigen::bfloat16");
  require(table_rows > 0 && table_dim > 0, function, "table shape [", table_rows, ", ",
          table_dim, "] must have max_positions > 0 and d_model > 0");
  require(batch > 0 && seq > 0 && d > 0, function, "embeddings shape [", batch, ", ", seq, ", ",
          d, "] must have no zero dimension");
  require(d == table_dim, function, "embeddings d_model = ", d, " must equal the table's d_model (",
          table_dim, ")");
  require(position_ids.dimension(0) == batch && position_ids.dimension(1) == seq, function,
          "position_ids shape [", position_ids.dimension(0), ", ", position_ids.dimension(1),
          "] must equal embeddings' [batch, seq] = [", batch, ", ", seq, "]");
}

}  // namespace detail

/// \brief embeddings[b, s, :] += table[position_ids[b, s] + position_offset, :], in place,
/// summed in float (double for double storage).
/// embeddings: [batch, seq, d_model]; table: [max_positions, d_model]; position_ids: [batch, seq]
/// Throws std::invalid_argument for shape mismatches and std::out_of_range for a position
/// outside the table (naming it and its [b, s]); every position is checked before the first
/// write, so on a throw the embeddings are untouched.
template <typename T>
void add_learned_positions_inplace(TensorView<T, 3> embeddings, ConstTensorView<T, 2> table,
                                   PositionIdsView position_ids,
                                   std::int64_t position_offset = 0) {
  constexpr std::string_view fn = "add_learned_positions_inplace";
  const Eigen::Index batch = embeddings.dimension(0), seq = embeddings.dimension(1),
                     d = embeddings.dimension(2);
  detail::validate_learned_shapes<T>(fn, table.dimension(0), table.dimension(1), batch, seq, d,
                                     position_ids);
  detail::validate_learned_positions(fn, position_ids, table.dimension(0), position_offset);
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index s = 0; s < seq; ++s) {
      T* out = embeddings.data() + (b * seq + s) * d;
      detail::add_values(out, table.data() + (position_ids(b, s) + position_offset) * d, d);
    }
  }
}

/// \brief out[b, s, :] = table[position_ids[b, s] + position_offset, :] (the embedding lookup).
/// table: [max_positions, d_model]; position_ids: [batch, seq]; out: [batch, seq, d_model]
/// Same errors and guarantees as add_learned_positions_inplace.
template <typename T>
void lookup_learned_positions(ConstTensorView<T, 2> table, PositionIdsView position_ids,
                              TensorView<T, 3> out, std::int64_t position_offset = 0) {
  constexpr std::string_view fn = "lookup_learned_positions";
  const Eigen::Index batch = out.dimension(0), seq = out.dimension(1), d = out.dimension(2);
  detail::validate_learned_shapes<T>(fn, table.dimension(0), table.dimension(1), batch, seq, d,
                                     position_ids);
  detail::validate_learned_positions(fn, position_ids, table.dimension(0), position_offset);
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index s = 0; s < seq; ++s) {
      const T* row = table.data() + (position_ids(b, s) + position_offset) * d;
      std::copy(row, row + d, out.data() + (b * seq + s) * d);
    }
  }
}

/// \brief A longer table: rows [0, max_positions) copy the trained table, the rest follow
/// `init`. The new rows are untrained (see LearnedExtendInit).
/// table: [max_positions, d_model] -> returns [new_max_positions, d_model]
/// Throws std::invalid_argument when new_max_positions < max_positions, the new table's size
/// overflows (new_max_positions * d_model elements past PTRDIFF_MAX bytes), the table is
/// empty, or init is not a LearnedExtendInit; std::bad_alloc when the memory runs out.
template <typename T>
Tensor<T, 2> extend_learned_table(ConstTensorView<T, 2> table, Eigen::Index new_max_positions,
                                  LearnedExtendInit init = LearnedExtendInit::kZeros) {
  constexpr std::string_view fn = "extend_learned_table";
  const Eigen::Index rows = table.dimension(0), d = table.dimension(1);
  detail::require(rows > 0 && d > 0, fn, "table shape [", rows, ", ", d,
                  "] must have max_positions > 0 and d_model > 0");
  detail::require(new_max_positions >= rows, fn, "new_max_positions = ", new_max_positions,
                  " must be >= the current max_positions (", rows, ")");
  // Eigen multiplies the dimensions unchecked: a wrapped product gave a small buffer that the
  // row loop then wrote past.
  const Eigen::Index max_rows =
      std::numeric_limits<std::ptrdiff_t>::max() / static_cast<Eigen::Index>(sizeof(T)) / d;
  detail::require(new_max_positions <= max_rows, fn, "new_max_positions = ", new_max_positions,
                  " rows of d_model = ", d, " overflow the addressable size (at most ", max_rows,
                  " rows)");
  detail::require(init == LearnedExtendInit::kZeros || init == LearnedExtendInit::kRepeatLast ||
                      init == LearnedExtendInit::kCyclic,
                  fn, "init = ", static_cast<int>(init), " is not a LearnedExtendInit");
  Tensor<T, 2> out(new_max_positions, d);
  for (Eigen::Index r = 0; r < new_max_positions; ++r) {
    T* dst = out.data() + r * d;
    if (r < rows) {
      std::copy(table.data() + r * d, table.data() + (r + 1) * d, dst);
      continue;
    }
    switch (init) {
      case LearnedExtendInit::kZeros: std::fill(dst, dst + d, T(0)); break;
      case LearnedExtendInit::kRepeatLast:
        std::copy(table.data() + (rows - 1) * d, table.data() + rows * d, dst);
        break;
      case LearnedExtendInit::kCyclic:
        std::copy(table.data() + (r % rows) * d, table.data() + (r % rows + 1) * d, dst);
        break;
    }
  }
  return out;
}

/// A learned position table: either a view of weights the caller keeps alive, or an owned copy.
/// Cheap to copy when it is a view; `extend` returns an owning table.
template <typename T>
class LearnedPositionTable {
 public:
  /// Wraps the caller's [max_positions, d_model] weights without copying.
  static LearnedPositionTable view(ConstTensorView<T, 2> weights) {
    return LearnedPositionTable(weights.data(), weights.dimension(0), weights.dimension(1));
  }
  /// Copies the weights into storage the table owns.
  static LearnedPositionTable copy_of(ConstTensorView<T, 2> weights) {
    return from_owned(Tensor<T, 2>(weights));
  }

  LearnedPositionTable(const LearnedPositionTable& other)
      : owned_(other.owned_), data_(other.data_), rows_(other.rows_), d_(other.d_) {
    if (owned_) data_ = owned_->data();
  }
  LearnedPositionTable& operator=(const LearnedPositionTable& other) {
    LearnedPositionTable copy(other);
    *this = std::move(copy);
    return *this;
  }
  // Eigen::Tensor's move keeps its heap buffer, so data_ stays valid.
  LearnedPositionTable(LearnedPositionTable&&) noexcept = default;
  LearnedPositionTable& operator=(LearnedPositionTable&&) noexcept = default;
  ~LearnedPositionTable() = default;

  Eigen::Index max_positions() const noexcept { return rows_; }
  Eigen::Index d_model() const noexcept { return d_; }
  bool owns_storage() const noexcept { return owned_.has_value(); }
  ConstTensorView<T, 2> weights() const noexcept { return ConstTensorView<T, 2>(data_, rows_, d_); }

  /// See add_learned_positions_inplace.
  void add_inplace(TensorView<T, 3> embeddings, PositionIdsView position_ids,
                   std::int64_t position_offset = 0) const {
    add_learned_positions_inplace<T>(embeddings, weights(), position_ids, position_offset);
  }
  /// See lookup_learned_positions.
  void lookup(PositionIdsView position_ids, TensorView<T, 3> out,
              std::int64_t position_offset = 0) const {
    lookup_learned_positions<T>(weights(), position_ids, out, position_offset);
  }
  /// See extend_learned_table: the added rows are untrained.
  LearnedPositionTable extend(Eigen::Index new_max_positions,
                              LearnedExtendInit init = LearnedExtendInit::kZeros) const {
    return from_owned(extend_learned_table<T>(weights(), new_max_positions, init));
  }

 private:
  LearnedPositionTable(const T* data, Eigen::Index rows, Eigen::Index d)
      : data_(data), rows_(rows), d_(d) {}

  static LearnedPositionTable from_owned(Tensor<T, 2> owned) {
    LearnedPositionTable table(nullptr, owned.dimension(0), owned.dimension(1));
    table.owned_.emplace(std::move(owned));
    table.data_ = table.owned_->data();
    return table;
  }

  std::optional<Tensor<T, 2>> owned_;  // engaged when the table owns its weights
  const T* data_ = nullptr;            // into owned_, or the caller's memory
  Eigen::Index rows_ = 0;
  Eigen::Index d_ = 0;
};

}  // namespace posenc
