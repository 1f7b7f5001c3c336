#pragma once
/// \file posenc/tensor.hpp
/// The tensor views every posenc kernel takes: row-major maps over the caller's memory.

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

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

/// A view or nothing, for the optional views of parameter structs (AttentionMetadata): assigning
/// a view rebinds it. std::optional<TensorMap> would not: once engaged, its operator= calls
/// TensorMap's, which copies the new view's elements into the memory of the old one (a decode
/// loop that sets query_positions each step would overwrite its first step's buffer).
template <typename View>
class OptionalView {
 public:
  OptionalView() = default;
  OptionalView(std::nullopt_t) noexcept {}  // NOLINT: implicit, as std::optional
  OptionalView(const View& view) : view_(std::in_place, view) {}  // NOLINT: implicit
  OptionalView(const OptionalView& other) { *this = other; }
  OptionalView& operator=(const OptionalView& other) {
    if (this != &other) {
      view_.reset();
      if (other.view_) view_.emplace(*other.view_);
    }
    return *this;
  }
  OptionalView& operator=(const View& view) {
    view_.reset();
    view_.emplace(view);
    return *this;
  }
  OptionalView& operator=(std::nullopt_t) noexcept {
    view_.reset();
    return *this;
  }
  template <typename... Args>
  View& emplace(Args&&... args) {
    view_.reset();
    return view_.emplace(std::forward<Args>(args)...);
  }
  void reset() noexcept { view_.reset(); }

  bool has_value() const noexcept { return view_.has_value(); }
  explicit operator bool() const noexcept { return view_.has_value(); }
  const View& operator*() const { return *view_; }
  const View* operator->() const { return &*view_; }
  const View& value() const { return view_.value(); }
  friend bool operator==(const OptionalView& v, std::nullopt_t) noexcept { return !v.view_; }
  friend bool operator!=(const OptionalView& v, std::nullopt_t) noexcept { return v.view_.has_value(); }

 private:
  std::optional<View> view_;
};

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
