#pragma once
/// \file posenc/attention_merge.hpp
/// Merging attention states. The attention of a query over keys A ∪ B (disjoint) follows from
/// its attentions over A and over B and their log-sum-exps (FlashInfer's merge_state,
/// FlashAttention's split-KV combine; Milakov & Gimelshein, "Online normalizer calculation for
/// softmax", 2018):
///
///   lse = log(e^lse_a + e^lse_b)
///   out = e^(lse_a - lse) out_a + e^(lse_b - lse) out_b
///
/// since each part's out is its weighted sum of V divided by its own sum of exponentials.
/// Uses: split-K decode over a long cache; a prefix shared by many sequences attended once
/// (cascade attention) and merged with each sequence's own suffix; the two segments of a
/// wrapped ring buffer. The states come from attention(q, k, v, out, lse, ...).
///
/// Attention sinks (AttentionParams::sink_logits) enter a state's lse: give them to exactly one
/// of the parts, or the merged softmax counts the sink twice. Keep the parts' outputs in float
/// (or double): 16-bit partial outputs are rounded once before the merge and again after.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "posenc/attention.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// \brief (out, lse) becomes the attention state over both key sets: the state over a key set
/// merged with `other`'s, over a disjoint one. A part with lse = -inf (it saw no key)
/// contributes nothing; two such parts give out = 0, lse = -inf. A part with lse = NaN (its
/// row met a NaN or +inf logit, see attention()) makes the merged row NaN, out and lse: the
/// attention over the union would have been NaN too.
/// out, other_out: [batch, q_len, heads, head_dim]; lse, other_lse: [batch, q_len, heads].
/// Throws std::invalid_argument, before writing anything, for mismatched shapes or an lse
/// entry that is +inf (no attention state has one).
template <typename T>
void merge_attention_state_inplace(TensorView<T, 4> out, TensorView<lse_t<T>, 3> lse,
                                   ConstTensorView<T, 4> other_out,
                                   ConstTensorView<lse_t<T>, 3> other_lse) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  using Acc = lse_t<T>;
  constexpr std::string_view fn = "merge_attention_state_inplace";
  for (int a = 0; a < 4; ++a) {
    detail::require(other_out.dimension(a) == out.dimension(a), fn, "other_out shape [",
                    other_out.dimension(0), ", ", other_out.dimension(1), ", ",
                    other_out.dimension(2), ", ", other_out.dimension(3),
                    "] must equal out shape [", out.dimension(0), ", ", out.dimension(1), ", ",
                    out.dimension(2), ", ", out.dimension(3), "]");
  }
  for (int a = 0; a < 3; ++a) {
    detail::require(lse.dimension(a) == out.dimension(a) &&
                        other_lse.dimension(a) == out.dimension(a),
                    fn, "lse shape [", lse.dimension(0), ", ", lse.dimension(1), ", ",
                    lse.dimension(2), "] and other_lse shape [", other_lse.dimension(0), ", ",
                    other_lse.dimension(1), ", ", other_lse.dimension(2),
                    "] must both be [batch, q_len, heads] = [", out.dimension(0), ", ",
                    out.dimension(1), ", ", out.dimension(2), "]");
  }
  const Eigen::Index rows = lse.size(), d = out.dimension(3);
  constexpr Acc inf = std::numeric_limits<Acc>::infinity();
  for (const Acc* part : {static_cast<const Acc*>(lse.data()), other_lse.data()}) {
    for (Eigen::Index r = 0; r < rows; ++r) {
      detail::require(part[r] != inf, fn, part == lse.data() ? "lse" : "other_lse", " entry ",
                      r, " = ", part[r],
                      " must be finite, -inf (a row that saw no key) or NaN (a NaN logit)");
    }
  }
  for (Eigen::Index r = 0; r < rows; ++r) {
    const Acc la = lse.data()[r], lb = other_lse.data()[r];
    T* o = out.data() + r * d;
    const T* ob = other_out.data() + r * d;
    // A NaN part first: std::max(-inf, NaN) is -inf, which would read as two empty parts.
    if (std::isnan(la) || std::isnan(lb)) {
      std::fill(o, o + d, detail::from_value<T>(std::numeric_limits<Acc>::quiet_NaN()));
      lse.data()[r] = std::numeric_limits<Acc>::quiet_NaN();
      continue;
    }
    const Acc top = std::max(la, lb);
    if (top == -inf) {
      std::fill(o, o + d, detail::from_value<T>(Acc(0)));
      continue;
    }
    // exp(-inf) = 0 exactly: an empty part weighs nothing.
    const Acc wa = std::exp(la - top), wb = std::exp(lb - top), total = wa + wb;
    const Acc fa = wa / total, fb = wb / total;
    for (Eigen::Index c = 0; c < d; ++c) {
      o[c] = detail::from_value<T>(fa * detail::to_compute(o[c]) + fb * detail::to_compute(ob[c]));
    }
    lse.data()[r] = top + std::log(total);
  }
}

}  // namespace posenc
