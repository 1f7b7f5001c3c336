// libFuzzer target for PagedKvCache (scripts/fuzz.sh SECONDS paged_kv_cache builds and runs it): a
// differential test of the pool as a state machine. The input bytes choose a pool (storage type,
// page size and count, sliding window, latent rows, FP8 scales) and a sequence of operations --
// add_sequence, fork, release, append, attend over a list of sequences, set_rope / update_rope /
// clear_rope, and invalid calls -- and a long-double model of each sequence's tokens predicts each
// result.
//
// Contract under test, after every operation:
// - each live sequence's length and page table: ceil(length / page_size) entries, the pages a
//   sliding-window pool may drop (wholly before the last chunk's first window) pointing at
//   num_pages(), the others real pages; page_refs(p) = the number of live sequences holding
//   p, free_pages() = the pages none holds; a page two sequences hold is full in both and at
//   the same index (so at the same positions);
// - every held slot's stored rows are the model's (R(t) k times the attention factor at
//   position t = slot, the values as given), within the storage rounding, through
//   key_pages() / value_pages() at the page the table names;
// - attend's out (and lse) equal the long-double softmax over the keys each query row sees
//   (causal by slot, window, chunk of positions), from the stored rows as they are;
// - an invalid call throws std::invalid_argument (std::out_of_range when pages run out) and
//   changes nothing: pools, tables, lengths, refs and the caller's out bit-identical.
// Any mismatch prints the operation and traps, so libFuzzer keeps the input. Without libFuzzer
// (-DPOSENC_FUZZ_MAIN) the file builds a driver that runs random inputs, as fuzz_kv_cache.cpp does.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <posenc/paged_kv_cache.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz_support.hpp"

namespace {

using namespace posenc_fuzz;
using ld = long double;
using Index = Eigen::Index;

/// One token of a sequence as the model sees it (its position is its slot).
struct Token {
  std::vector<ld> k, v;
  int k_roundings = 1;
  ld k_compute = 0.0L;
};

struct ModelSeq {
  std::vector<Token> tokens;
  Index first_query = 0;  // first slot of the last appended chunk
  Index dropped = 0;      // leading pages a sliding-window pool may have given back
};

struct PoolShape {
  Index num_pages, page_size, kv_heads, d, dv, group;
  std::int64_t window;
  bool latent;
};

template <typename T>
class PagedHarness {
  using Pool = posenc::PagedKvCache<T>;
  using Id = typename Pool::SequenceId;

 public:
  PagedHarness(Choices& in, Values& val, const PoolShape& s)
      : in_(in),
        val_(val),
        s_(s),
        pool_(s.latent ? Pool::latent(s.num_pages, s.page_size, s.kv_heads, s.d, s.dv, s.window)
                       : Pool(s.num_pages, s.page_size, s.kv_heads, s.d, s.window,
                              s.dv == s.d && in.chance(50) ? 0 : s.dv)) {
    if constexpr (posenc::detail::is_float8_v<T>) {
      if (in_.chance(70)) pool_.set_scales(random_kv_scales(in_, s.kv_heads, s.latent, 40, -5));
    }
  }

  void run() {
    for (int step = 0; step < 32 && !in_.empty(); ++step) {
      const int op = static_cast<int>(in_.in(0, 99));
      if (op < 10)
        add();
      else if (op < 18)
        fork();
      else if (op < 24)
        release();
      else if (op < 50)
        append();
      else if (op < 75)
        attend();
      else if (op < 81)
        set_rope();
      else if (op < 85)
        update_rope();
      else if (op < 87) {
        pool_.clear_rope();
        plan_.reset();
      } else
        invalid_call();
      check_state(op);
    }
  }

 private:
  ld k_scale(Index g) const { return static_cast<ld>(pool_.scales().k_of(g)); }
  ld v_scale(Index g) const { return static_cast<ld>(pool_.scales().v_of(g)); }
  Index row_k() const { return s_.kv_heads * s_.d; }
  Index row_v() const { return s_.kv_heads * s_.dv; }

  /// A live sequence chosen by the input, or none.
  std::optional<Id> pick() {
    if (seqs_.empty()) return std::nullopt;
    auto it = seqs_.begin();
    std::advance(it, in_.in(0, static_cast<std::int64_t>(seqs_.size()) - 1));
    return it->first;
  }

  void add() {
    const Id s = pool_.add_sequence();
    if (seqs_.count(s)) fail("add_sequence reused the live id " + std::to_string(s));
    seqs_[s] = ModelSeq{};
  }

  void fork() {
    const auto parent = pick();
    if (!parent) return;
    const ModelSeq& from = seqs_[*parent];
    const bool partial = from.tokens.size() % static_cast<std::size_t>(s_.page_size) != 0;
    if (partial && pool_.free_pages() == 0) {
      expect_throw<std::out_of_range>("fork without a free page", [&] { pool_.fork(*parent); });
      return;
    }
    const Id child = pool_.fork(*parent);
    if (seqs_.count(child)) fail("fork reused the live id " + std::to_string(child));
    seqs_[child] = from;
  }

  void release() {
    const auto s = pick();
    if (!s) return;
    pool_.release(*s);
    seqs_.erase(*s);
  }

  template <typename In>
  void append_as(Id s, Index n) {
    std::vector<In> k(static_cast<std::size_t>(n * row_k())),
        v(static_cast<std::size_t>(n * row_v()));
    const double amp = in_.chance(80) ? 1.0 : 4.0;
    for (auto& x : k) x = static_cast<In>(static_cast<float>(between(val_, -amp, amp)));
    for (auto& x : v) x = static_cast<In>(static_cast<float>(between(val_, -amp, amp)));
    posenc::ConstTensorView<In, 3> kt(k.data(), n, s_.kv_heads, s_.d);
    posenc::ConstTensorView<In, 3> vt(v.data(), n, s_.kv_heads, s_.dv);
    const auto call = [&] {
      if (s_.latent)
        pool_.append_latent(s, kt);
      else
        pool_.append(s, kt, vt);
    };

    // Pages: what the append needs against what is free (plus what the window gives back).
    ModelSeq& m = seqs_[s];
    const Index len = static_cast<Index>(m.tokens.size());
    const Index ps = s_.page_size;
    const auto& table = pool_.pages(s);
    const Index need = (len + n + ps - 1) / ps - static_cast<Index>(table.size());
    const Index droppable = s_.window > 0 ? std::max<Index>(0, len - s_.window + 1) / ps : 0;
    Index freed = 0;
    for (Index i = 0; i < droppable; ++i) {
      const std::int32_t p = table[static_cast<std::size_t>(i)];
      freed += p != s_.num_pages && pool_.page_refs(p) == 1;
    }
    if (need > pool_.free_pages() + freed) {
      expect_throw<std::out_of_range>("append past the free pages", call);
      return;
    }
    call();
    m.dropped = std::max(m.dropped, droppable);
    m.first_query = len;
    for (Index t = 0; t < n; ++t) {
      Token tok;
      const In* kr = k.data() + t * row_k();
      for (Index i = 0; i < row_k(); ++i) tok.k.push_back(to_ld(kr[i]));
      if (plan_) {
        rotate_ld(tok.k, s_.kv_heads, s_.d, static_cast<ld>(len + t), plan_->freqs, plan_->layout,
                  static_cast<ld>(plan_->freqs.attention_factor));
        tok.k_compute = compute_eps<In>() + 0x1.0p-50L * static_cast<ld>(len + t);
      }
      if (!s_.latent) {
        const In* vr = v.data() + t * row_v();
        for (Index i = 0; i < row_v(); ++i) tok.v.push_back(to_ld(vr[i]));
      }
      m.tokens.push_back(std::move(tok));
    }
  }

  void append() {
    const auto s = pick();
    if (!s) return;
    const Index n = in_.chance(60) ? 1 : in_.in(1, 3 * s_.page_size + 2);
    switch (in_.in(0, 5)) {
      case 0:
        append_as<double>(*s, n);
        break;
      case 1:
        append_as<Eigen::bfloat16>(*s, n);
        break;
      case 2:
        append_as<Eigen::half>(*s, n);
        break;
      default:
        append_as<float>(*s, n);
        break;
    }
  }

  void set_rope() {
    auto p = make_plan(in_, s_.d, s_.dv, s_.latent);
    if (!p) return;
    pool_.set_rope(p->freqs, p->layout);
    plan_ = p;
  }

  void update_rope() {
    auto p = make_plan(in_, s_.d, s_.dv, s_.latent);
    if (!p) return;
    if (!plan_ || p->freqs.rotary_dim != plan_->freqs.rotary_dim ||
        p->freqs.rotary_offset != plan_->freqs.rotary_offset) {
      expect_throw<std::invalid_argument>("update_rope of another slice / without a plan",
                                          [&] { pool_.update_rope(p->freqs); });
      return;
    }
    pool_.update_rope(p->freqs);
    p->layout = plan_->layout;  // the pool keeps its layout
    for (auto& [id, m] : seqs_) {
      for (std::size_t t = 0; t < m.tokens.size(); ++t) {
        if (static_cast<Index>(t) < m.dropped * s_.page_size) continue;  // given back
        Token& tok = m.tokens[t];
        const auto pos = static_cast<ld>(t);
        rotate_ld(tok.k, s_.kv_heads, s_.d, -pos, plan_->freqs, plan_->layout,
                  1.0L / static_cast<ld>(plan_->freqs.attention_factor));
        rotate_ld(tok.k, s_.kv_heads, s_.d, pos, p->freqs, p->layout,
                  static_cast<ld>(p->freqs.attention_factor));
        ++tok.k_roundings;
        tok.k_compute += 2 * compute_eps<T>() + 0x1.0p-50L * pos;
      }
    }
    plan_ = p;
  }

  void attend() {
    if (seqs_.empty()) return;
    // A list of sequences (repeats allowed), q_len within every one's length (and, with a window,
    // within its last chunk).
    std::vector<Id> list;
    const Index count = in_.in(1, 4);
    Index q_max = std::numeric_limits<Index>::max();
    for (Index b = 0; b < count; ++b) {
      const Id s = *pick();
      const ModelSeq& m = seqs_[s];
      const auto len = static_cast<Index>(m.tokens.size());
      if (len == 0) continue;
      q_max = std::min(q_max, s_.window > 0 ? len - m.first_query : len);
      list.push_back(s);
    }
    if (list.empty()) return;
    const Index q_len = in_.chance(50) ? 1 : in_.in(1, q_max);
    const Index heads = s_.kv_heads * s_.group;
    const posenc::AttentionParams params =
        make_params(in_, val_, heads, false, s_.latent, s_.window, 3 * s_.page_size + 8);
    switch (in_.in(0, 5)) {
      case 0:
        attend_as<double>(list, q_len, heads, params);
        break;
      case 1:
        attend_as<Eigen::bfloat16>(list, q_len, heads, params);
        break;
      case 2:
        attend_as<Eigen::half>(list, q_len, heads, params);
        break;
      default:
        attend_as<float>(list, q_len, heads, params);
        break;
    }
  }

  template <typename TQ>
  void attend_as(const std::vector<Id>& list, Index q_len, Index heads,
                 const posenc::AttentionParams& params) {
    using L = posenc::lse_t<TQ>;
    const auto batch = static_cast<Index>(list.size());
    g_context = "pool of " + std::to_string(s_.num_pages) + " pages of " +
                std::to_string(s_.page_size) + ", kv_heads " + std::to_string(s_.kv_heads) +
                " heads " + std::to_string(heads) + " d " + std::to_string(s_.d) + " dv " +
                std::to_string(s_.dv) + " window(pool) " + std::to_string(s_.window) +
                (s_.latent ? " latent" : "") + ", " + std::to_string(batch) + " sequences, q_len " +
                std::to_string(q_len) + " " + describe(params, plan_);
    std::vector<TQ> q(static_cast<std::size_t>(batch * q_len * heads * s_.d));
    for (auto& x : q) x = static_cast<TQ>(static_cast<float>(between(val_, -1.0, 1.0)));
    std::vector<TQ> out(static_cast<std::size_t>(batch * q_len * heads * s_.dv),
                        static_cast<TQ>(-7.0f));
    const bool want_lse = in_.chance(40);
    std::vector<L> lse(static_cast<std::size_t>(batch * q_len * heads), L(-9));
    std::optional<posenc::TensorView<L, 3>> lt;
    if (want_lse) lt = posenc::TensorView<L, 3>(lse.data(), batch, q_len, heads);
    pool_.attend(list, posenc::ConstTensorView<TQ, 4>(q.data(), batch, q_len, heads, s_.d),
                 posenc::TensorView<TQ, 4>(out.data(), batch, q_len, heads, s_.dv), params, lt);

    const Index group = heads / s_.kv_heads;
    const bool causal = params.mask == posenc::MaskMode::kCausal;
    const std::int64_t window = params.sliding_window, chunk = params.attention_chunk_size;
    for (Index b = 0; b < batch; ++b) {
      const Id s = list[static_cast<std::size_t>(b)];
      const auto len = static_cast<Index>(seqs_[s].tokens.size());
      for (Index i = 0; i < q_len; ++i) {
        const Index a = len - q_len + i;  // slot and position of the query
        for (Index h = 0; h < heads; ++h) {
          const Index g = h / group;
          std::vector<SeenKey> seen;
          for (Index j = 0; j < len; ++j) {
            if (causal && j > a) continue;
            if (window > 0 && (causal ? a - j : std::abs(a - j)) >= window) continue;
            if (chunk > 0 && a / chunk != j / chunk) continue;
            if (j < seqs_[s].dropped * s_.page_size) {
              fail("attend: query slot " + std::to_string(a) + " sees slot " + std::to_string(j) +
                   " of a page the pool gave back");
            }
            SeenKey key{j, {}, {}};
            for (Index c = 0; c < s_.d; ++c) key.k.push_back(key_at(s, j, g, c));
            for (Index c = 0; c < s_.dv; ++c) key.v.push_back(value_at(s, j, g, c));
            seen.push_back(std::move(key));
          }
          std::vector<ld> qv(static_cast<std::size_t>(s_.d));
          const auto row = (b * q_len + i) * heads + h;
          for (Index c = 0; c < s_.d; ++c) {
            qv[static_cast<std::size_t>(c)] = to_ld(q[static_cast<std::size_t>(row * s_.d + c)]);
          }
          if (plan_) {
            rotate_ld(qv, 1, s_.d, static_cast<ld>(a), plan_->freqs, plan_->layout,
                      static_cast<ld>(plan_->freqs.attention_factor));
          }
          check_attention_row(qv, row_scale(params, plan_, s_.d, a), a, seen, params, h,
                              out.data() + row * s_.dv, s_.dv,
                              want_lse ? lse.data() + row : static_cast<const L*>(nullptr),
                              std::string("attend ") + type_name<T>() + " pool, b " +
                                  std::to_string(b) + " i " + std::to_string(i));
        }
      }
    }
  }

  /// Stored element (scale applied) of slot j of sequence s, through its page table.
  ld key_at(Id s, Index j, Index g, Index c) const {
    const std::int32_t page = pool_.pages(s)[static_cast<std::size_t>(j / s_.page_size)];
    return to_ld(pool_.key_pages()(page, j % s_.page_size, g, c)) * k_scale(g);
  }
  ld value_at(Id s, Index j, Index g, Index c) const {
    if (s_.latent) return key_at(s, j, g, c);
    const std::int32_t page = pool_.pages(s)[static_cast<std::size_t>(j / s_.page_size)];
    return to_ld(pool_.value_pages()(page, j % s_.page_size, g, c)) * v_scale(g);
  }

  void invalid_call() {
    const Index heads = s_.kv_heads * s_.group;
    std::vector<float> q(static_cast<std::size_t>(4 * (heads + 1) * (s_.d + 1)), 0.5f);
    std::vector<float> out(static_cast<std::size_t>(4 * (heads + 1) * (s_.dv + 1)), -7.0f);
    const std::vector<float> out_before = out;
    posenc::AttentionParams params;
    if (s_.latent) params.scale = 0.1;
    if (s_.window > 0) params.sliding_window = s_.window;
    const Id unknown = 1000000 + in_.in(0, 9);
    const auto s = pick();
    switch (in_.in(0, 6)) {
      case 0:
        expect_throw<std::invalid_argument>("release of an unknown id",
                                            [&] { pool_.release(unknown); });
        break;
      case 1:
        expect_throw<std::invalid_argument>("fork of an unknown id", [&] { pool_.fork(unknown); });
        break;
      case 2: {  // q_len past the sequence
        if (!s) return;
        const auto len = static_cast<Index>(seqs_[*s].tokens.size());
        if (len + 1 > 3) return;
        std::vector<float> qq(static_cast<std::size_t>((len + 1) * heads * s_.d), 0.5f);
        std::vector<float> oo(static_cast<std::size_t>((len + 1) * heads * s_.dv), -7.0f);
        const auto oo_before = oo;
        expect_throw<std::invalid_argument>("attend q_len > length", [&] {
          pool_.attend({*s}, posenc::ConstTensorView<float, 4>(qq.data(), 1, len + 1, heads, s_.d),
                       posenc::TensorView<float, 4>(oo.data(), 1, len + 1, heads, s_.dv), params);
        });
        if (oo != oo_before) fail("attend q_len > length wrote out");
        break;
      }
      case 3: {  // an unknown sequence in the list
        if (!s || seqs_[*s].tokens.empty()) return;
        expect_throw<std::invalid_argument>("attend an unknown id", [&] {
          pool_.attend({*s, unknown},
                       posenc::ConstTensorView<float, 4>(q.data(), 2, 1, heads, s_.d),
                       posenc::TensorView<float, 4>(out.data(), 2, 1, heads, s_.dv), params);
        });
        break;
      }
      case 4: {  // keys of the wrong width
        if (!s) return;
        std::vector<float> k(static_cast<std::size_t>(row_k() + s_.kv_heads), 1.0f);
        std::vector<float> v(static_cast<std::size_t>(row_v()), 1.0f);
        posenc::ConstTensorView<float, 3> kt(k.data(), 1, s_.kv_heads, s_.d + 1);
        posenc::ConstTensorView<float, 3> vt(v.data(), 1, s_.kv_heads, s_.dv);
        expect_throw<std::invalid_argument>("append key width", [&] {
          if (s_.latent)
            pool_.append_latent(*s, kt);
          else
            pool_.append(*s, kt, vt);
        });
        break;
      }
      case 5: {  // slopes of the wrong count
        if (!s || seqs_[*s].tokens.empty()) return;
        params.alibi_slopes.assign(static_cast<std::size_t>(heads + 1), 0.5);
        expect_throw<std::invalid_argument>("attend slopes", [&] {
          pool_.attend({*s}, posenc::ConstTensorView<float, 4>(q.data(), 1, 1, heads, s_.d),
                       posenc::TensorView<float, 4>(out.data(), 1, 1, heads, s_.dv), params);
        });
        break;
      }
      default: {  // a window wider than the pool's, or a latent pool without a
                  // scale
        if (!s || seqs_[*s].tokens.empty() || (s_.window == 0 && !s_.latent)) return;
        if (s_.window > 0)
          params.sliding_window = s_.window + 1;
        else
          params.scale.reset();
        expect_throw<std::invalid_argument>("attend window / latent scale", [&] {
          pool_.attend({*s}, posenc::ConstTensorView<float, 4>(q.data(), 1, 1, heads, s_.d),
                       posenc::TensorView<float, 4>(out.data(), 1, 1, heads, s_.dv), params);
        });
        break;
      }
    }
    if (out != out_before) fail("an invalid call wrote out");
  }

  struct Snapshot {
    std::vector<unsigned char> bytes;
    std::map<Id, std::vector<std::int32_t>> tables;
    std::map<Id, Index> lengths;
    std::vector<std::int32_t> refs;
    Index free;
    bool rope;
    bool operator==(const Snapshot& o) const {
      return bytes == o.bytes && tables == o.tables && lengths == o.lengths && refs == o.refs &&
             free == o.free && rope == o.rope;
    }
  };
  Snapshot snapshot() const {
    Snapshot snap{{}, {}, {}, {}, pool_.free_pages(), pool_.has_rope()};
    const auto add = [&](const auto& view) {
      const auto* c = reinterpret_cast<const unsigned char*>(view.data());
      snap.bytes.insert(snap.bytes.end(), c, c + view.size() * sizeof(T));
    };
    add(pool_.key_pages());
    if (!s_.latent) add(pool_.value_pages());
    for (const auto& [id, m] : seqs_) {
      snap.tables[id] = pool_.pages(id);
      snap.lengths[id] = pool_.length(id);
    }
    for (Index p = 0; p < s_.num_pages; ++p)
      snap.refs.push_back(pool_.page_refs(static_cast<std::int32_t>(p)));
    return snap;
  }

  template <typename E, typename F>
  void expect_throw(const char* what, F call) {
    const Snapshot before = snapshot();
    bool thrown = false;
    try {
      call();
    } catch (const E&) {
      thrown = true;
    } catch (const std::exception& e) {
      fail(std::string(what) + ": threw another type: " + e.what());
    }
    if (!thrown) fail(std::string(what) + ": did not throw");
    if (!(snapshot() == before)) fail(std::string(what) + ": threw but changed the pool");
  }

  void check_state(int op) {
    const std::string at = "op " + std::to_string(op) + ": ";
    if (pool_.sequences() != static_cast<Index>(seqs_.size())) fail(at + "sequences() disagrees");
    if (pool_.has_rope() != plan_.has_value()) fail(at + "has_rope() disagrees");
    const Index ps = s_.page_size;
    // Holders of every page: (sequence, index in its table).
    std::map<std::int32_t, std::vector<std::pair<Id, Index>>> holders;
    for (const auto& [id, m] : seqs_) {
      const auto len = static_cast<Index>(m.tokens.size());
      if (pool_.length(id) != len) {
        fail(at + "length(" + std::to_string(id) + ") = " + std::to_string(pool_.length(id)) +
             ", model " + std::to_string(len));
      }
      const auto& table = pool_.pages(id);
      if (static_cast<Index>(table.size()) != (len + ps - 1) / ps) fail(at + "page table size");
      for (Index i = 0; i < static_cast<Index>(table.size()); ++i) {
        const std::int32_t p = table[static_cast<std::size_t>(i)];
        if (i < m.dropped) {
          if (p != s_.num_pages) fail(at + "a page before the window is still held");
          continue;
        }
        if (p < 0 || p >= s_.num_pages) fail(at + "page id " + std::to_string(p) + " out of range");
        holders[p].push_back({id, i});
      }
    }
    Index used = 0;
    for (Index p = 0; p < s_.num_pages; ++p) {
      const auto it = holders.find(static_cast<std::int32_t>(p));
      const auto n = it == holders.end() ? 0 : static_cast<std::int32_t>(it->second.size());
      if (pool_.page_refs(static_cast<std::int32_t>(p)) != n) {
        fail(at + "page_refs(" + std::to_string(p) +
             ") = " + std::to_string(pool_.page_refs(static_cast<std::int32_t>(p))) + ", held by " +
             std::to_string(n));
      }
      used += n > 0;
      if (n > 1) {
        for (const auto& [id, i] : it->second) {
          if (i != it->second.front().second ||
              static_cast<Index>(seqs_[id].tokens.size()) < (i + 1) * ps) {
            fail(at + "page " + std::to_string(p) + " is shared but not full at one index");
          }
        }
      }
    }
    if (pool_.free_pages() != s_.num_pages - used) fail(at + "free_pages() disagrees");
    // The stored rows.
    for (const auto& entry : seqs_) {
      const auto id = entry.first;  // a plain variable: C++17 lambdas cannot capture a binding
      const auto& m = entry.second;
      for (Index j = m.dropped * ps; j < static_cast<Index>(m.tokens.size()); ++j) {
        const Token& tok = m.tokens[static_cast<std::size_t>(j)];
        for (Index g = 0; g < s_.kv_heads; ++g) {
          compare(at + "key", id, j, g, s_.d, tok.k, tok.k_roundings, tok.k_compute, k_scale(g),
                  [&](Index c) { return key_at(id, j, g, c); });
          if (!s_.latent) {
            compare(at + "value", id, j, g, s_.dv, tok.v, 1, 0.0L, v_scale(g),
                    [&](Index c) { return value_at(id, j, g, c); });
          }
        }
      }
    }
  }

  template <typename Get>
  void compare(const std::string& what, Id id, Index j, Index g, Index width,
               const std::vector<ld>& want, int roundings, ld compute, ld scale, Get got) {
    ld top = 0.0L;
    for (Index c = 0; c < width; ++c)
      top = std::max(top, std::fabs(want[static_cast<std::size_t>(g * width + c)]));
    const ld tol = top * (rel_eps<T>() * roundings + compute) + abs_eps<T>() * scale * roundings;
    for (Index c = 0; c < width; ++c) {
      const ld w = want[static_cast<std::size_t>(g * width + c)], x = got(c);
      if (!(std::fabs(w - x) <= tol)) {
        char buf[240];
        std::snprintf(buf, sizeof buf,
                      "%s %s of sequence %ld slot %ld head %ld [%ld] = %.9Lg, "
                      "model %.9Lg (tol %.3Lg)",
                      what.c_str(), type_name<T>(), static_cast<long>(id), static_cast<long>(j),
                      static_cast<long>(g), static_cast<long>(c), x, w, tol);
        fail(buf);
      }
    }
  }

  Choices& in_;
  Values& val_;
  PoolShape s_;
  Pool pool_;
  std::map<Id, ModelSeq> seqs_;
  std::optional<Plan> plan_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Choices in(data, size);
  std::uint64_t seed = 0;
  for (int i = 0; i < 4; ++i) seed = (seed << 8) | in.byte();
  Values val(seed);
  static constexpr Index kDims[] = {2, 4, 6, 8, 16, 18, 32, 64};
  PoolShape s{};
  s.num_pages = in.in(1, 24);
  s.page_size = in.in(1, 17);
  s.kv_heads = in.in(1, 3);
  s.group = in.in(1, 4);
  s.d = kDims[in.in(0, 7)];
  s.latent = in.chance(15);
  s.dv = s.latent ? in.in(1, s.d) : (in.chance(70) ? s.d : kDims[in.in(0, 7)]);
  s.window = in.chance(25) ? in.in(1, 40) : 0;
  switch (in.in(0, 7)) {
    case 0:
      PagedHarness<double>(in, val, s).run();
      break;
    case 1:
      PagedHarness<Eigen::bfloat16>(in, val, s).run();
      break;
    case 2:
      PagedHarness<Eigen::half>(in, val, s).run();
      break;
    case 3:
      PagedHarness<posenc::float8_e4m3>(in, val, s).run();
      break;
    case 4:
      PagedHarness<posenc::float8_e5m2>(in, val, s).run();
      break;
    default:
      PagedHarness<float>(in, val, s).run();
      break;
  }
  return 0;
}

#ifdef POSENC_FUZZ_MAIN
#include "driver.hpp"
int main(int argc, char** argv) {
  const long runs = posenc_fuzz::run_random_inputs(argc, argv, 768, [](std::uint64_t seed) {
    if (seed % 100 == 0) std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(seed));
  });
  std::fprintf(stderr, "%ld runs, no mismatch\n", runs);
  return 0;
}
#endif
