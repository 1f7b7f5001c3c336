#pragma once
/// \file posenc/paged_kv_cache.hpp
/// A per-layer paged KV cache (vLLM's block manager, in miniature): one pool of num_pages pages
/// of page_size tokens shared by any number of sequences. A sequence takes a page only when its
/// last one is full and gives its pages back when released, so memory follows the tokens
/// actually held rather than batch * max_len; a forked sequence shares its parent's full pages
/// (parallel sampling, beam search, a common prompt) until the two diverge.
///
///   page_size = 4        pool   p0 [a0 a1 a2 a3]  p1 [a4 a5 .. ..]  p2 [c4 .. .. ..]  p3 free
///   a: 6 tokens          pages {0, 1}
///   c = fork(a) after 4  pages {0, 2}   (p0 shared, refcount 2; c's own tail in p2)
///
/// Shared pages are always full: fork copies the parent's partial last page, so no append ever
/// writes a page another sequence reads (no copy-on-write needed).
///
/// Token t of a sequence sits at slot t and has position t (RoPE angle, ALiBi distance, causal
/// order). With RoPE set, append stores keys rotated by their positions (in float, rounded once
/// to T; FP8 with the pool's scales, see set_scales and kv_cache.hpp) and attend rotates the
/// queries, as KvCache does. attend runs attention_paged over the
/// pool: the kernel reads each sequence's pages in place.
///
/// Sliding-window layers (5th constructor argument W > 0; Mistral, Gemma-2/3 local layers):
/// queries see only their last W slots, so a page all of whose slots lie before every future
/// query's window is given back as the sequence grows (vLLM does the same). An append of n
/// tokens at length L keeps the slots from L - W + 1 on (what the chunk's first query sees),
/// and the sequence's table points its dropped pages at a page of zeros that belongs to no
/// one; the kernel masks those slots anyway. A sequence then holds at most
/// ceil((W - 1) / page_size) + 1 pages plus its newest chunk, however long it grows. attend
/// requires params.sliding_window in [1, W] and queries within the last appended chunk.
///
/// Flow per layer:  s = add_sequence(); append(s, K_prompt, V_prompt); attend({s, ...}, Q, out)
///                  each step: append(s, k_t, v_t) for every s; attend(seqs, q_t, out)
///                  release(s) when a sequence finishes.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "posenc/attention.hpp"
#include "posenc/attention_paged.hpp"
#include "posenc/attention_rope.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/detail/cache_line_vector.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/rope.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/rope_params.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

template <typename T>
class PagedKvCache {
  static_assert(detail::is_kv_storage_type_v<T>, "posenc: PagedKvCache storage must be float, "
                                                 "double, Eigen::half, Eigen::bfloat16 or FP8");

 public:
  using SequenceId = std::int64_t;

  /// \brief An empty pool of num_pages pages of [page_size, kv_heads, head_dim] for K and
  /// [page_size, kv_heads, v_head_dim] for V (v_head_dim 0 = head_dim; narrower for DeepSeek
  /// MLA without weight absorption).
  /// sliding_window = W > 0: a pool for a sliding-window layer, which gives back the pages no
  /// query can see any more (see the file comment); 0 keeps every token.
  /// Throws std::invalid_argument when a dimension is <= 0, v_head_dim < 0, sliding_window < 0,
  /// or num_pages does not fit int32 (page tables are int32, as vLLM's and FlashInfer's).
  PagedKvCache(Eigen::Index num_pages, Eigen::Index page_size, Eigen::Index kv_heads,
               Eigen::Index head_dim, std::int64_t sliding_window = 0,
               Eigen::Index v_head_dim = 0)
      : PagedKvCache(num_pages, page_size, kv_heads, head_dim, sliding_window, v_head_dim,
                     false) {}

  /// \brief An empty pool of MLA latent rows (absorbed DeepSeek decode, as vLLM's MLA
  /// backends page it; see attention_mla.hpp): pages of [page_size, kv_heads, head_dim] rows
  /// that are the keys and whose first v_head_dim elements are the values; no V pages.
  /// Append with append_latent; attend requires params.scale. Throws std::invalid_argument as
  /// the constructor, and for v_head_dim outside [1, head_dim].
  static PagedKvCache latent(Eigen::Index num_pages, Eigen::Index page_size,
                             Eigen::Index kv_heads, Eigen::Index head_dim,
                             Eigen::Index v_head_dim, std::int64_t sliding_window = 0) {
    detail::require_latent_width("PagedKvCache::latent", head_dim, v_head_dim);
    return PagedKvCache(num_pages, page_size, kv_heads, head_dim, sliding_window, v_head_dim,
                        true);
  }

 private:
  PagedKvCache(Eigen::Index num_pages, Eigen::Index page_size, Eigen::Index kv_heads,
               Eigen::Index head_dim, std::int64_t sliding_window, Eigen::Index v_head_dim,
               bool latent)
      : num_pages_(num_pages), page_size_(page_size), kv_heads_(kv_heads), d_(head_dim),
        dv_(v_head_dim == 0 ? head_dim : v_head_dim), latent_(latent), window_(sliding_window) {
    detail::require(num_pages > 0 && page_size > 0 && kv_heads > 0 && head_dim > 0,
                    "PagedKvCache", "shape [num_pages, page_size, kv_heads, head_dim] = [",
                    num_pages, ", ", page_size, ", ", kv_heads, ", ", head_dim,
                    "] must have no zero dimension");
    detail::require(v_head_dim >= 0, "PagedKvCache", "v_head_dim = ", v_head_dim,
                    " must be >= 0 (0: head_dim)");
    detail::require(num_pages < std::numeric_limits<std::int32_t>::max(), "PagedKvCache",
                    "num_pages = ", num_pages, " must be < 2^31 - 1 (int32 page ids)");
    detail::require(sliding_window >= 0, "PagedKvCache", "sliding_window = ", sliding_window,
                    " must be >= 0 (0: keep every token)");
    // One page more than the pool: page num_pages stays zero, the stand-in for dropped pages.
    k_.assign(detail::checked_elements("PagedKvCache", "keys",
                                       {num_pages + 1, page_size, kv_heads, head_dim}, sizeof(T)),
              T(0.0f));
    if (!latent) {
      v_.assign(detail::checked_elements("PagedKvCache", "values",
                                         {num_pages + 1, page_size, kv_heads, dv_}, sizeof(T)),
                T(0.0f));
    }
    refs_.assign(static_cast<std::size_t>(num_pages), 0);
    // Lowest ids first out of the stack.
    for (Eigen::Index p = num_pages; p-- > 0;) free_.push_back(static_cast<std::int32_t>(p));
  }

 public:
  Eigen::Index num_pages() const noexcept { return num_pages_; }
  Eigen::Index page_size() const noexcept { return page_size_; }
  Eigen::Index kv_heads() const noexcept { return kv_heads_; }
  Eigen::Index head_dim() const noexcept { return d_; }
  Eigen::Index v_head_dim() const noexcept { return dv_; }
  /// True for a pool of latent rows (PagedKvCache::latent).
  bool is_latent() const noexcept { return latent_; }
  /// Pages no sequence holds.
  Eigen::Index free_pages() const noexcept { return static_cast<Eigen::Index>(free_.size()); }
  /// Live sequences.
  Eigen::Index sequences() const noexcept { return static_cast<Eigen::Index>(seqs_.size()); }
  /// The window W of a sliding-window pool, or 0.
  std::int64_t sliding_window() const noexcept { return window_; }
  /// Sequences holding page p (0 = free; > 1 = a shared, full page).
  std::int32_t page_refs(std::int32_t page) const {
    detail::require(page >= 0 && page < num_pages_, "PagedKvCache::page_refs", "page = ", page,
                    " must be in [0, num_pages = ", num_pages_, ")");
    return refs_[static_cast<std::size_t>(page)];
  }

  /// \brief FP8 pools: the scales keys and values are stored with, per tensor or per kv head
  /// (see KvScales). Throws std::invalid_argument, changing nothing, unless every scale is
  /// finite and > 0, per-head lists hold kv_heads entries, no page is in use and, for a latent
  /// pool, the key and value scales are equal.
  void set_scales(const KvScales& scales) {
    static_assert(detail::is_float8_v<T>, "posenc: only FP8 pools store with a scale");
    detail::validate_kv_scales("PagedKvCache::set_scales", scales,
                               page_size_ * (num_pages_ - free_pages()), latent_, kv_heads_);
    scales_ = scales;
  }
  /// The storage scales (1, 1 unless an FP8 pool set others).
  const KvScales& scales() const noexcept { return scales_; }

  /// The pools [num_pages, page_size, kv_heads, head_dim] (values: v_head_dim; rows no
  /// sequence holds unspecified).
  ConstTensorView<T, 4> key_pages() const {
    return {k_.data(), num_pages_, page_size_, kv_heads_, d_};
  }
  /// A latent pool has no value pages: value_pages() throws std::invalid_argument there.
  ConstTensorView<T, 4> value_pages() const {
    detail::require(!latent_, "PagedKvCache::value_pages", "a latent pool stores no values of ",
                    "their own: they are the first v_head_dim = ", dv_, " elements of each ",
                    "key_pages() row");
    return {v_.data(), num_pages_, page_size_, kv_heads_, dv_};
  }

  /// Tokens held by sequence s / its page table (page of slot t: pages(s)[t / page_size];
  /// num_pages() for a page a sliding-window pool dropped). Throw std::invalid_argument for
  /// an unknown s.
  Eigen::Index length(SequenceId s) const { return find("PagedKvCache::length", s).length; }
  const std::vector<std::int32_t>& pages(SequenceId s) const {
    return find("PagedKvCache::pages", s).pages;
  }

  /// \brief Rotates keys on append and queries on attend with this plan from now on (keys
  /// already stored keep their rotation). Throws std::invalid_argument when the plan does not
  /// fit head_dim.
  void set_rope(RopeFrequencies freqs, RopeLayout layout) {
    detail::validate_attention_rope("PagedKvCache::set_rope", freqs, layout, d_);
    rope_ = std::move(freqs);
    rope_layout_ = layout;
  }
  /// \brief Switches to a new plan of the same rotary slice and re-rotates every stored key to
  /// it, in place: a dynamic-NTK or LongRoPE plan that changed (RopePlan::update() == true)
  /// keeps the pool valid without a re-prefill (the stale cached keys at Phi-3's short -> long
  /// switch: transformers #33129, vLLM #27431). Each page is turned once, however many
  /// sequences share it (shared pages are full and sit at the same index, so at the same
  /// positions, in every holder); 16-bit keys are rounded once (rerotate_rope_inplace).
  /// Throws std::invalid_argument when no plan is set, or the new one does not fit head_dim or
  /// rotates another slice; the pool is then unchanged.
  void update_rope(RopeFrequencies freqs, const RopeApplyOptions& options = {}) {
    constexpr std::string_view fn = "PagedKvCache::update_rope";
    detail::validate_rope_update(fn, rope_, freqs, rope_layout_, d_);
    // Every page is turned with the same plans and shapes, at positions below num_pages *
    // page_size: if the first call does not throw (before writing), none does.
    std::vector<bool> turned(static_cast<std::size_t>(num_pages_), false);
    const Eigen::Index page_elems = page_size_ * kv_heads_ * d_;
    for (const auto& [id, seq] : seqs_) {
      for (std::size_t i = 0; i < seq.pages.size(); ++i) {
        const std::int32_t page = seq.pages[i];
        if (page == zero_page() || turned[static_cast<std::size_t>(page)]) continue;
        turned[static_cast<std::size_t>(page)] = true;
        const Eigen::Index first = static_cast<Eigen::Index>(i) * page_size_;
        const Eigen::Index rows = std::min(page_size_, seq.length - first);
        detail::rerotate_cached_keys(k_.data() + page * page_elems, rows, kv_heads_, d_,
                                     RopePositions::contiguous(1, rows, first), *rope_, freqs,
                                     rope_layout_, options, staging_);
      }
    }
    rope_ = std::move(freqs);
  }
  void clear_rope() { rope_.reset(); }
  bool has_rope() const noexcept { return rope_.has_value(); }

  /// A new, empty sequence (no page yet).
  SequenceId add_sequence() {
    const SequenceId s = next_id_++;
    seqs_.emplace(s, Sequence{});
    return s;
  }

  /// \brief A new sequence holding the same tokens as parent: its full pages are shared, its
  /// partial last page (if any) is copied into a free page.
  /// Throws std::invalid_argument for an unknown parent, std::out_of_range when the copy needs
  /// a page and none is free; nothing changes then.
  SequenceId fork(SequenceId parent) {
    constexpr std::string_view fn = "PagedKvCache::fork";
    const Sequence& from = find(fn, parent);
    const bool partial = from.length % page_size_ != 0;
    if (partial && free_.empty()) {
      detail::throw_out_of_range(fn, "sequence ", parent, " has a partial last page to copy and ",
                                 "no page of ", num_pages_, " is free");
    }
    Sequence child = from;
    for (const std::int32_t p : child.pages) {
      if (p != zero_page()) ++refs_[static_cast<std::size_t>(p)];
    }
    if (partial) {
      const std::int32_t shared = child.pages.back();
      --refs_[static_cast<std::size_t>(shared)];
      const std::int32_t own = take_page();
      for (auto [pool, width] : {std::pair{&k_, d_}, std::pair{&v_, dv_}}) {
        if (pool->empty()) continue;  // a latent pool's values live in its key rows
        const auto page_elems = static_cast<std::ptrdiff_t>(page_size_ * kv_heads_ * width);
        const auto src = pool->begin() + shared * page_elems;
        std::copy(src, src + page_elems, pool->begin() + own * page_elems);
      }
      child.pages.back() = own;
    }
    const SequenceId s = next_id_++;
    seqs_.emplace(s, std::move(child));
    return s;
  }

  /// \brief Forgets sequence s; pages no other sequence holds become free.
  /// Throws std::invalid_argument for an unknown s.
  void release(SequenceId s) {
    const Sequence& seq = find("PagedKvCache::release", s);
    for (const std::int32_t p : seq.pages) drop_page(p);
    seqs_.erase(s);
    if (seqs_.empty()) nan_codes_ = false;
  }

  /// \brief Appends n tokens to sequence s at slots (= positions) length(s) ... + n - 1: keys
  /// (rotated when RoPE is set) and values, taking free pages as needed (a sliding-window pool
  /// first gives back the pages before the chunk's first window).
  /// k: [n, kv_heads, head_dim], v: [n, kv_heads, v_head_dim], n >= 1.
  /// Throws std::invalid_argument (unknown s, shapes), std::out_of_range when the pool has too
  /// few free pages; nothing changes then.
  template <typename In>
  void append(SequenceId s, ConstTensorView<In, 3> k, ConstTensorView<In, 3> v) {
    detail::require(!latent_, "PagedKvCache::append", "this is a latent pool (values are the ",
                    "first v_head_dim of each key row): append its rows with append_latent");
    append_rows("PagedKvCache::append", s, k, &v);
  }

  /// \brief A latent pool's append: kv [n, kv_heads, head_dim] rows ([c_kv | k_pe]; k_pe
  /// rotated when RoPE is set) at slots length(s) ... Throws as append, and
  /// std::invalid_argument on a pool that is not latent.
  template <typename In>
  void append_latent(SequenceId s, ConstTensorView<In, 3> kv) {
    detail::require(latent_, "PagedKvCache::append_latent", "this pool keeps values of their ",
                    "own: append keys and values with append (PagedKvCache::latent makes a ",
                    "latent pool)");
    append_rows<In>("PagedKvCache::append_latent", s, kv, nullptr);
  }

 private:
  /// append / append_latent (v null: latent rows).
  template <typename In>
  void append_rows(std::string_view fn, SequenceId s, ConstTensorView<In, 3> k,
                   const ConstTensorView<In, 3>* v) {
    static_assert(detail::is_storage_type_v<In>, "posenc: input must be a storage type");
    Sequence& seq = find(fn, s);
    const Eigen::Index n = k.dimension(0);
    const Eigen::Index want_k[3] = {n, kv_heads_, d_};
    const Eigen::Index want_v[3] = {n, kv_heads_, dv_};
    for (int a = 0; a < 3; ++a) {
      detail::require(k.dimension(a) == want_k[a], fn, v ? "k" : "kv", " shape [",
                      k.dimension(0), ", ", k.dimension(1), ", ", k.dimension(2),
                      "] must be [n, kv_heads, head_dim] = [", n, ", ", kv_heads_, ", ", d_, "]");
      detail::require(!v || v->dimension(a) == want_v[a], fn, "v shape [",
                      v ? v->dimension(0) : 0, ", ", v ? v->dimension(1) : 0, ", ",
                      v ? v->dimension(2) : 0, "] must be [n, kv_heads, v_head_dim] = [", n,
                      ", ", kv_heads_, ", ", dv_, "]");
    }
    detail::require(n > 0, fn, "n = 0 tokens: nothing to append");
    // Positions count to 2^53 (and seq.length + n must not overflow on the way).
    if (n > kMaxRopePosition - seq.length) {
      detail::throw_out_of_range(fn, "appending n = ", n, " tokens to sequence ", s, " (",
                                 seq.length, " tokens) passes position 2^53");
    }
    const Eigen::Index need =
        pages_for(seq.length + n) - static_cast<Eigen::Index>(seq.pages.size());
    // A sliding-window pool's pages wholly before slot L - W + 1 (the chunk's first query's
    // window) are dropped first; those only this sequence holds become free for the append.
    const Eigen::Index droppable =
        window_ > 0 ? std::max<Eigen::Index>(0, seq.length - window_ + 1) / page_size_ : 0;
    Eigen::Index freed = 0;
    for (Eigen::Index i = 0; i < droppable; ++i) {
      const std::int32_t p = seq.pages[static_cast<std::size_t>(i)];
      freed += p != zero_page() && refs_[static_cast<std::size_t>(p)] == 1;
    }
    if (need > free_pages() + freed) {
      detail::throw_out_of_range(fn, "appending n = ", n, " tokens to sequence ", s, " (",
                                 seq.length, " tokens) needs ", need, " new pages of ",
                                 page_size_, " tokens; ", free_pages() + freed, " of ",
                                 num_pages_, " are free");
    }
    for (Eigen::Index i = 0; i < droppable; ++i) {
      drop_page(seq.pages[static_cast<std::size_t>(i)]);
      seq.pages[static_cast<std::size_t>(i)] = zero_page();
    }
    for (Eigen::Index i = 0; i < need; ++i) seq.pages.push_back(take_page());
    const Eigen::Index row = kv_heads_ * d_;
    if (rope_) {
      // Rotate a float (double) copy at positions length ... length + n - 1, round once.
      using Acc = detail::compute_t<In>;
      auto& stage = staging_.convert<Acc>(k.data(), static_cast<std::size_t>(n * row));
      const TensorView<Acc, 4> keys(stage.data(), 1, n, kv_heads_, d_);
      apply_rope_inplace<Acc>(rope_heads<Acc>(keys), RopePositions::contiguous(1, n, seq.length),
                              *rope_, rope_layout_);
      store(seq, stage.data(), k_, d_, n, scales_.k, scales_.k_heads);
    } else {
      store(seq, k.data(), k_, d_, n, scales_.k, scales_.k_heads);
    }
    if (v) store(seq, v->data(), v_, dv_, n, scales_.v, scales_.v_heads);
    seq.first_query = seq.length;
    seq.length += n;
  }

 public:

  /// \brief Attention of each listed sequence's last q_len tokens against all of its tokens:
  /// out[b] = softmax(scale q[b] K_s^T + ALiBi + causal mask) V_s for s = seqs[b], query i at
  /// slot length(s) - q_len + i (rotated there when RoPE is set; the default scale then takes
  /// the plan's softmax_scale_multiplier). q: [seqs.size(), q_len, heads, head_dim], out:
  /// [seqs.size(), q_len, heads, v_head_dim],
  /// 1 <= q_len <= length(s) for every s; a sliding-window pool requires q_len <= the size of
  /// each sequence's last appended chunk and params.sliding_window in [1, W].
  /// lse (optional): [seqs.size(), q_len, heads], each row's log-sum-exp as attention()'s, to
  /// merge with another attention state (attention_merge.hpp).
  /// A latent pool requires params.scale (see attention_paged_latent).
  /// Throws std::invalid_argument (unknown sequence, shapes, q_len, parameters) before writing.
  template <typename TQ>
  void attend(const std::vector<SequenceId>& seqs, ConstTensorView<TQ, 4> q,
              TensorView<TQ, 4> out, const AttentionParams& params = {},
              std::optional<TensorView<lse_t<TQ>, 3>> lse = std::nullopt) {
    static_assert(detail::is_storage_type_v<TQ>, "posenc: query must be a storage type");
    constexpr std::string_view fn = "PagedKvCache::attend";
    const auto batch = static_cast<Eigen::Index>(seqs.size());
    const Eigen::Index q_len = q.dimension(1), heads = q.dimension(2);
    detail::require(batch > 0 && q.dimension(0) == batch, fn, "q batch = ", q.dimension(0),
                    " must equal the number of sequences listed (", batch, ", at least 1)");
    detail::require_window_within(fn, "pool", window_, params);
    if (latent_) detail::require_latent_scale(fn, params);
    Eigen::Index longest = 1, max_pages = 1;
    found_.clear();
    for (const SequenceId s : seqs) {
      const Sequence& seq = find(fn, s);
      found_.push_back(&seq);  // unordered_map values stay where they are
      detail::require(q_len >= 1 && q_len <= seq.length, fn, "q_len = ", q_len,
                      " must be in [1, length = ", seq.length, "] of sequence ", s,
                      ": append the new tokens' keys and values first");
      detail::require(window_ == 0 || q_len <= seq.length - seq.first_query, fn, "q_len = ",
                      q_len, " exceeds the last appended chunk (", seq.length - seq.first_query,
                      " tokens) of sequence ", s, ": earlier queries' windows may have been ",
                      "dropped from this sliding-window pool");
      longest = std::max(longest, seq.length);
      max_pages = std::max(max_pages, static_cast<Eigen::Index>(seq.pages.size()));
    }
    const ConstTensorView<T, 4> k_shape(k_.data(), batch, longest, kv_heads_, d_);
    const ConstTensorView<T, 4> v_shape(k_.data(), batch, longest, kv_heads_, dv_);
    detail::require_view(fn, "q", q);
    detail::require_view(fn, "out", out);
    detail::validate_attention(fn, q, k_shape, v_shape, out, params, {});
    if (lse) detail::validate_lse(fn, q, *lse);
    lse_t<TQ>* lse_rows = lse ? lse->data() : nullptr;

    // Page table and lengths of this call (buffers reused across steps).
    table_.assign(static_cast<std::size_t>(batch * max_pages), 0);
    lens_.resize(static_cast<std::size_t>(batch));
    starts_.resize(static_cast<std::size_t>(batch));
    for (Eigen::Index b = 0; b < batch; ++b) {
      const Sequence& seq = *found_[static_cast<std::size_t>(b)];
      std::copy(seq.pages.begin(), seq.pages.end(), table_.begin() + b * max_pages);
      lens_[static_cast<std::size_t>(b)] = seq.length;
      starts_[static_cast<std::size_t>(b)] = seq.length - q_len;
    }
    const ConstTensorView<std::int32_t, 2> table(table_.data(), batch, max_pages);
    const ConstTensorView<std::int64_t, 1> lens(lens_.data(), batch);
    const auto run = [&](auto k_pages, auto v_pages) {
      if (rope_) {
        using Acc = detail::compute_t<TQ>;
        auto& stage = staging_.convert<Acc>(q.data(), static_cast<std::size_t>(q.size()));
        const TensorView<Acc, 4> rotated(stage.data(), batch, q_len, heads, d_);
        apply_rope_inplace<Acc>(rope_heads<Acc>(rotated),
                                RopePositions::contiguous_from(
                                    ConstTensorView<std::int64_t, 1>(starts_.data(), batch), q_len),
                                *rope_, rope_layout_);
        // A view of the staged rows (a ConstTensorView made from `rotated` would copy them).
        detail::run_attention_paged(
            ConstTensorView<Acc, 4>(stage.data(), batch, q_len, heads, d_), k_pages, v_pages,
            table, lens, out.data(), params, workspace_, lse_rows, nullptr,
            rope_->softmax_scale_multiplier, latent_, 0, scales_);
      } else {
        detail::run_attention_paged(q, k_pages, v_pages, table, lens, out.data(), params,
                                    workspace_, lse_rows, nullptr, 1.0, latent_, 0, scales_);
      }
    };
    if constexpr (std::is_same_v<T, float8_e4m3>) {
      if (!nan_codes_) {
        return run(detail::as_finite_codes(kernel_pages(k_, d_)),
                   detail::as_finite_codes(value_kernel_pages()));
      }
    }
    run(kernel_pages(k_, d_), value_kernel_pages());
  }

 private:
  struct Sequence {
    std::vector<std::int32_t> pages;
    Eigen::Index length = 0;
    Eigen::Index first_query = 0;  // first slot of the last appended chunk
  };

  std::int32_t zero_page() const noexcept { return static_cast<std::int32_t>(num_pages_); }
  /// A pool of rows of `width` per kv head as the kernel sees it: with the zero page after the
  /// last one.
  ConstTensorView<T, 4> kernel_pages(const detail::cache_line_vector<T>& pool,
                                     Eigen::Index width) const {
    return {pool.data(), num_pages_ + 1, page_size_, kv_heads_, width};
  }

  /// The values as the kernel sees them: V pages, or a latent pool's key pages with
  /// v_head_dim columns (run_attention_paged's values_in_keys).
  ConstTensorView<T, 4> value_kernel_pages() const {
    return {latent_ ? k_.data() : v_.data(), num_pages_ + 1, page_size_, kv_heads_, dv_};
  }

  /// One holder fewer for page p (the zero page has none); free when none is left.
  void drop_page(std::int32_t p) {
    if (p != zero_page() && --refs_[static_cast<std::size_t>(p)] == 0) free_.push_back(p);
  }

  /// ceil(tokens / page_size) without forming tokens + page_size - 1 (tokens >= 0).
  Eigen::Index pages_for(Eigen::Index tokens) const {
    return tokens / page_size_ + (tokens % page_size_ != 0);
  }

  const Sequence& find(std::string_view fn, SequenceId s) const {
    const auto it = seqs_.find(s);
    detail::require(it != seqs_.end(), fn, "sequence ", s, " is not in the cache (",
                    seqs_.size(), " live; ids come from add_sequence / fork)");
    return it->second;
  }
  Sequence& find(std::string_view fn, SequenceId s) {
    return const_cast<Sequence&>(static_cast<const PagedKvCache&>(*this).find(fn, s));
  }

  std::int32_t take_page() {
    const std::int32_t p = free_.back();
    free_.pop_back();
    refs_[static_cast<std::size_t>(p)] = 1;
    return p;
  }

  /// Rounds src [n, kv_heads, width] into the sequence's slots length ... length + n - 1 of
  /// pool (FP8: src / scale, or / head_scales[g] in kv head g when given; see to_cache_value).
  template <typename Src>
  void store(const Sequence& seq, const Src* src, detail::cache_line_vector<T>& pool,
             Eigen::Index width, Eigen::Index n, double scale,
             const std::vector<double>& head_scales = {}) {
    const Eigen::Index row = kv_heads_ * width;
    for (Eigen::Index t = 0; t < n; ++t) {
      const Eigen::Index slot = seq.length + t;
      const Eigen::Index page = seq.pages[static_cast<std::size_t>(slot / page_size_)];
      T* to = pool.data() + (page * page_size_ + slot % page_size_) * row;
      const Src* from = src + t * row;
      nan_codes_ |= detail::store_cache_rows(from, to, 1, kv_heads_, width, scale, head_scales);
    }
  }

  Eigen::Index num_pages_, page_size_, kv_heads_, d_, dv_;
  bool latent_;
  std::int64_t window_;
  detail::cache_line_vector<T> k_, v_;  // pages start on a cache line (see there)
  KvScales scales_;
  bool nan_codes_ = false;  // an E4M3 NaN code was stored (attend then tests for them)
  std::vector<std::int32_t> refs_, free_;
  std::unordered_map<SequenceId, Sequence> seqs_;
  SequenceId next_id_ = 0;
  std::optional<RopeFrequencies> rope_;
  RopeLayout rope_layout_ = RopeLayout::kHalfSplit;
  // Reused across steps: they grow to the largest call, then stay.
  detail::StagingBuffers staging_;
  std::vector<std::int32_t> table_;
  std::vector<std::int64_t> lens_, starts_;
  std::vector<const Sequence*> found_;  // attend's sequences, looked up once
  AttentionWorkspace workspace_;
};

}  // namespace posenc
