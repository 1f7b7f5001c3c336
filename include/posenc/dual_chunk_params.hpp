#pragma once
/// \file posenc/dual_chunk_params.hpp
/// Dual Chunk Attention's parameters and position tables (dual_chunk_attention.hpp has the
/// attention; hf_config reads Qwen2.5-1M's `dual_chunk_attention_config` into these).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "posenc/attention_types.hpp"
#include "posenc/error.hpp"

namespace posenc {

/// Qwen2.5-1M's `dual_chunk_attention_config` (the defaults are vLLM's when a key is absent;
/// Qwen2.5-7B-Instruct-1M: chunk_size 262144, local_size 8192, L0 262144).
struct DualChunkParams {
  std::int64_t chunk_size = 8192;  ///< S: the largest rotated distance; > local_size, <= 2^53
  std::int64_t local_size = 1024;  ///< chunk_len = chunk_size - local_size; >= 0
  /// L0 of the length scaling s(L) = max(1, 0.1 ln(L / L0) + 1); 0 = no scaling. >= 0.
  std::int64_t original_max_position_embeddings = 0;
};

/// Which query rotation meets a key: the key in the query's own chunk, the chunk before it, or
/// an earlier one.
enum class DualChunkPart : std::uint8_t { kIntra = 0, kSuccessive = 1, kInter = 2 };

namespace detail {

inline void validate_dual_chunk(std::string_view fn, const DualChunkParams& p) {
  require(p.local_size >= 0, fn, "local_size = ", p.local_size, " must be >= 0");
  require(p.chunk_size > p.local_size && p.chunk_size <= kMaxAttentionPosition, fn,
          "chunk_size = ", p.chunk_size, " must be > local_size (", p.local_size,
          ") and <= 2^53");
  require(p.original_max_position_embeddings >= 0, fn, "original_max_position_embeddings = ",
          p.original_max_position_embeddings, " must be >= 0 (0 = no length scaling)");
}

inline std::int64_t dual_chunk_len(const DualChunkParams& p) {
  return p.chunk_size - p.local_size;
}

/// The query position of a part (validated params, position >= 0).
inline std::int64_t dual_chunk_query_at(std::int64_t position, DualChunkPart part,
                                        const DualChunkParams& p) {
  const std::int64_t c = dual_chunk_len(p);
  switch (part) {
    case DualChunkPart::kIntra: return position % c;
    case DualChunkPart::kSuccessive: return std::min(position % c + c, p.chunk_size);
    case DualChunkPart::kInter: break;
  }
  return std::min(2 * c - 1, p.chunk_size);
}

inline double dual_chunk_scale_at(std::int64_t seq_len, const DualChunkParams& p) {
  if (p.original_max_position_embeddings == 0) return 1.0;
  const double s = 0.1 * std::log(static_cast<double>(seq_len) /
                                  static_cast<double>(p.original_max_position_embeddings)) +
                   1.0;
  return std::max(1.0, s);
}

}  // namespace detail

/// \brief The position a key is rotated at: position mod chunk_len.
/// Throws std::invalid_argument for bad params or a position outside [0, 2^53].
inline std::int64_t dual_chunk_key_position(std::int64_t position, const DualChunkParams& params) {
  constexpr std::string_view fn = "dual_chunk_key_position";
  detail::validate_dual_chunk(fn, params);
  detail::require(position >= 0 && position <= detail::kMaxAttentionPosition, fn, "position = ",
                  position, " must be in [0, 2^53]");
  return position % detail::dual_chunk_len(params);
}

/// \brief The position a query at `position` is rotated at to meet the keys of `part` (the
/// table in dual_chunk_attention.hpp). Throws std::invalid_argument as dual_chunk_key_position.
inline std::int64_t dual_chunk_query_position(std::int64_t position, DualChunkPart part,
                                              const DualChunkParams& params) {
  constexpr std::string_view fn = "dual_chunk_query_position";
  detail::validate_dual_chunk(fn, params);
  detail::require(position >= 0 && position <= detail::kMaxAttentionPosition, fn, "position = ",
                  position, " must be in [0, 2^53]");
  detail::require(part == DualChunkPart::kIntra || part == DualChunkPart::kSuccessive ||
                      part == DualChunkPart::kInter,
                  fn, "part = ", static_cast<int>(part), " is not a DualChunkPart");
  return detail::dual_chunk_query_at(position, part, params);
}

/// \brief vLLM's length scaling s(L) = max(1, 0.1 ln(L / L0) + 1) for a sequence of seq_len
/// tokens (1 when original_max_position_embeddings is 0). Throws std::invalid_argument for bad
/// params or seq_len < 1.
inline double dual_chunk_scaling_factor(std::int64_t seq_len, const DualChunkParams& params) {
  constexpr std::string_view fn = "dual_chunk_scaling_factor";
  detail::validate_dual_chunk(fn, params);
  detail::require(seq_len >= 1, fn, "seq_len = ", seq_len, " must be >= 1");
  return detail::dual_chunk_scale_at(seq_len, params);
}

}  // namespace posenc
