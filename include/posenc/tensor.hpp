#pragma once
/// \file posenc/tensor.hpp
/// The tensor views every posenc kernel takes: row-major maps over the caller's memory.

#include <cstdint>
#include <string_view>

#include <unsupported/Eigen/CXX11/Tensor>

namespace posenc {

/// Row-major view over caller-owned memory; the last index is contiguous. Eigen's default is
/// ColMajor, and ML frameworks hand out row-major buffers, so posenc spells RowMajor once here
/// (TensorFlow's TTypes precedent). Unaligned: posenc does not own the allocator.
template <typename T, int Rank>
using TensorView = Eigen::TensorMap<Eigen::Tensor<T, Rank, Eigen::RowMajor, Eigen::Index>>;

/// Read-only counterpart of TensorView.
template <typename T, int Rank>
using ConstTensorView =
    Eigen::TensorMap<const Eigen::Tensor<T, Rank, Eigen::RowMajor, Eigen::Index>>;

/// Owning row-major tensor, for the few functions that return new storage (tables, caches).
template <typename T, int Rank>
using Tensor = Eigen::Tensor<T, Rank, Eigen::RowMajor, Eigen::Index>;

/// Positions are int64, as in PyTorch/HF `position_ids`.
using PositionIdsView = ConstTensorView<std::int64_t, 2>;  ///< [batch, seq]

/// Axis order of a rank-4 activation tensor (head_dim is always innermost).
enum class HeadLayout : std::uint8_t {
  kBSHD = 0,  ///< [batch, seq, heads, head_dim]   (vLLM / FlashInfer "NHD")
  kBHSD = 1,  ///< [batch, heads, seq, head_dim]   (HF after q.transpose(1, 2))
  kSBHD = 2,  ///< [seq, batch, heads, head_dim]   (TransformerEngine / Megatron "sbhd")
};

constexpr std::string_view to_string(HeadLayout layout) noexcept {
  switch (layout) {
    case HeadLayout::kBSHD: return "BSHD";
    case HeadLayout::kBHSD: return "BHSD";
    case HeadLayout::kSBHD: return "SBHD";
  }
  return "unknown";
}

}  // namespace posenc
