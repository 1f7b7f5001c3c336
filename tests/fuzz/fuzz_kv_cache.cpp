// libFuzzer target for KvCache (scripts/fuzz.sh SECONDS kv_cache builds and runs it): a
// differential test of the cache as a state machine. The input bytes choose a cache (storage type,
// shape, rolling window, latent rows, FP8 scales) and a sequence of operations -- append (with
// padding), attend (plain or tree, with the AttentionParams options that apply to a cache), erase,
// shift_positions, clear, set_rope / update_rope / clear_rope, and invalid calls
// -- and a long-double model of the cache predicts each result.
//
// Contract under test, after every operation:
// - the stored rows are the model's: R(pos) k times the plan's attention_factor for keys (RoPE
//   in long double from the plan's inv_freq, re-derived here), the values as given; within the
//   storage type's rounding, once per rounding the row went through (append, each
//   re-rotation); positions, validity, size() and evicted() exactly;
// - attend's out (and lse) equal softmax(scale q.k + bias) V over the keys the documentation
//   says each query row sees, computed in long double from the stored rows as they are (so the
//   attention check is tight whatever the storage rounding): float / double queries within
//   2e-5 of max|V|, 16-bit queries within their output rounding;
// - an invalid call throws std::invalid_argument (std::out_of_range for an append that does
//   not fit) and changes nothing: storage, metadata and the caller's out / lse bit-identical.
// Any mismatch prints the operation and traps, so libFuzzer keeps the input.
//
// Tensor values come from a generator seeded by the input, so the fuzzer steers the structure.
// Without libFuzzer (-DPOSENC_FUZZ_MAIN) the file builds a driver that runs random inputs:
//   g++ -std=c++17 -O2 -DPOSENC_FUZZ_MAIN -I include -isystem /usr/include/eigen3
//       tests/fuzz/fuzz_kv_cache.cpp -o fuzz_kv_cache   (then ./fuzz_kv_cache 2000)

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <posenc/kv_cache.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "fuzz_support.hpp"

namespace {

using namespace posenc_fuzz;
using ld = long double;
using Index = Eigen::Index;

/// One stored slot as the model sees it: the exact expected key and value rows (before the storage
/// rounding) and how many times the stored row was rounded.
struct Slot {
  std::int64_t pos = 0;
  bool valid = true;
  std::vector<ld> k, v;
  int k_roundings = 1;
  /// Relative error of the arithmetic the row went through: append rotates in compute_t<In>,
  /// shift_positions and update_rope in compute_t<T>.
  ld k_compute = 0.0L;
};

struct Shape {
  Index batch, max_len, kv_heads, d, dv, group;
  std::int64_t window;
  bool latent;
};

template <typename T>
class Harness {
 public:
  Harness(Choices& in, Values& val, const Shape& s)
      : in_(in),
        val_(val),
        s_(s),
        cache_(s.latent
                   ? posenc::KvCache<T>::latent(s.batch, s.max_len, s.kv_heads, s.d, s.dv, s.window)
                   : posenc::KvCache<T>(s.batch, s.max_len, s.kv_heads, s.d, s.window,
                                        s.dv == s.d && in.chance(50) ? 0 : s.dv)),
        model_(static_cast<std::size_t>(s.batch)) {
    if constexpr (posenc::detail::is_float8_v<T>) {
      if (in_.chance(70)) cache_.set_scales(random_kv_scales(in_, s.kv_heads, s.latent, 50, -6));
    }
  }

  void run() {
    for (int step = 0; step < 24 && !in_.empty(); ++step) {
      const int op = static_cast<int>(in_.in(0, 99));
      if (op < 30)
        append();
      else if (op < 60)
        attend();
      else if (op < 66)
        erase();
      else if (op < 72)
        shift();
      else if (op < 80)
        set_rope();
      else if (op < 85)
        update_rope();
      else if (op < 87) {
        cache_.clear();
        for (auto& m : model_) m.clear();
        evicted_ = 0;
      } else if (op < 89) {
        cache_.clear_rope();
        plan_.reset();
      } else
        invalid_call();
      check_state(op);
    }
  }

 private:
  Index size() const { return static_cast<Index>(model_[0].size()); }
  Index row_k() const { return s_.kv_heads * s_.d; }
  Index row_v() const { return s_.kv_heads * s_.dv; }
  ld k_scale(Index g) const { return static_cast<ld>(cache_.scales().k_of(g)); }
  ld v_scale(Index g) const { return static_cast<ld>(cache_.scales().v_of(g)); }

  std::int64_t position_choice() {
    switch (in_.in(0, 7)) {
      case 0:
        return in_.in(0, 1 << 20);
      case 1:
        return in_.in(0, std::int64_t{1} << 24);
      default:
        return in_.in(0, 300);
    }
  }

  std::optional<Plan> make_plan() { return posenc_fuzz::make_plan(in_, s_.d, s_.dv, s_.latent); }

  // --- operations -------------------------------------------------------------------------------

  template <typename In>
  void append_as(Index n, const std::vector<std::int64_t>& pos,
                 const std::vector<std::uint8_t>& valid, bool with_valid) {
    const Index kw = row_k(), vw = row_v();
    std::vector<In> k(static_cast<std::size_t>(s_.batch * n * kw));
    std::vector<In> v(static_cast<std::size_t>(s_.batch * n * vw));
    const double amp = in_.chance(80) ? 1.0 : 4.0;
    for (auto& x : k) x = static_cast<In>(static_cast<float>(between(val_, -amp, amp)));
    for (auto& x : v) x = static_cast<In>(static_cast<float>(between(val_, -amp, amp)));
    posenc::ConstTensorView<In, 4> kt(k.data(), s_.batch, n, s_.kv_heads, s_.d);
    posenc::ConstTensorView<In, 4> vt(v.data(), s_.batch, n, s_.kv_heads, s_.dv);
    posenc::PositionIdsView pt(pos.data(), s_.batch, n);
    std::optional<posenc::ConstTensorView<std::uint8_t, 2>> vm;
    if (with_valid) vm = posenc::ConstTensorView<std::uint8_t, 2>(valid.data(), s_.batch, n);

    // Model first: what fits, what a rolling cache drops.
    const Index keep = s_.window > 0 ? std::min<Index>(size(), s_.window - 1) : size();
    const bool fits = n <= s_.max_len - keep;
    if (!fits) {
      expect_throw<std::out_of_range>("append overflow", [&] {
        if (s_.latent)
          cache_.append_latent(kt, pt, vm);
        else
          cache_.append(kt, vt, pt, vm);
      });
      return;
    }
    if (s_.latent)
      cache_.append_latent(kt, pt, vm);
    else
      cache_.append(kt, vt, pt, vm);
    if (n > s_.max_len - size()) {
      const Index drop = size() - keep;
      for (auto& m : model_) m.erase(m.begin(), m.begin() + drop);
      evicted_ += drop;
    }
    for (Index b = 0; b < s_.batch; ++b) {
      for (Index t = 0; t < n; ++t) {
        Slot slot;
        slot.pos = pos[static_cast<std::size_t>(b * n + t)];
        slot.valid = !with_valid || valid[static_cast<std::size_t>(b * n + t)] != 0;
        // The angle p w is uncertain by an ulp or so of itself (the recurrence between contiguous
        // positions, rope.hpp), w <= 1 here.
        slot.k_compute = plan_ ? compute_eps<In>() + 0x1.0p-50L * static_cast<ld>(slot.pos) : 0.0L;
        const In* kr = k.data() + (b * n + t) * kw;
        for (Index i = 0; i < kw; ++i) slot.k.push_back(to_ld(kr[i]));
        if (plan_) {
          rotate_ld(slot.k, s_.kv_heads, s_.d, static_cast<ld>(slot.pos), plan_->freqs,
                    plan_->layout, static_cast<ld>(plan_->freqs.attention_factor));
        }
        if (!s_.latent) {
          const In* vr = v.data() + (b * n + t) * vw;
          for (Index i = 0; i < vw; ++i) slot.v.push_back(to_ld(vr[i]));
        }
        model_[static_cast<std::size_t>(b)].push_back(std::move(slot));
      }
    }
  }

  void append() {
    const Index n = in_.chance(60) ? 1 : in_.in(1, std::min<Index>(s_.max_len + 2, 40));
    std::vector<std::int64_t> pos(static_cast<std::size_t>(s_.batch * n));
    std::vector<std::uint8_t> valid(pos.size(), 1);
    const bool with_valid = in_.chance(40);
    for (Index b = 0; b < s_.batch; ++b) {
      // Mostly the next positions of the sequence; sometimes anything in range.
      std::int64_t p = model_[static_cast<std::size_t>(b)].empty()
                           ? 0
                           : model_[static_cast<std::size_t>(b)].back().pos + 1;
      if (in_.chance(15)) p = position_choice();
      const Index pad = with_valid ? in_.in(0, n) : 0;
      for (Index t = 0; t < n; ++t) {
        const auto at = static_cast<std::size_t>(b * n + t);
        if (t < pad) {
          valid[at] = 0;
          pos[at] = in_.chance(50) ? 0 : 1;
        } else {
          pos[at] = in_.chance(90) ? p++ : position_choice();
        }
      }
    }
    switch (in_.in(0, 5)) {
      case 0:
        append_as<double>(n, pos, valid, with_valid);
        break;
      case 1:
        append_as<Eigen::bfloat16>(n, pos, valid, with_valid);
        break;
      case 2:
        append_as<Eigen::half>(n, pos, valid, with_valid);
        break;
      default:
        append_as<float>(n, pos, valid, with_valid);
        break;
    }
  }

  /// The expected stored key / value element (scale applied) and its tolerance.
  void check_rows(int op) {
    const auto keys = cache_.keys();
    const auto pos = cache_.positions();
    const auto valid = cache_.valid();
    for (Index b = 0; b < s_.batch; ++b) {
      for (Index j = 0; j < size(); ++j) {
        const Slot& m = model_[static_cast<std::size_t>(b)][static_cast<std::size_t>(j)];
        if (pos(b, j) != m.pos || (valid(b, j) != 0) != m.valid) {
          fail("op " + std::to_string(op) + ": slot " + std::to_string(j) + " of sequence " +
               std::to_string(b) + " holds position " + std::to_string(pos(b, j)) + " valid " +
               std::to_string(valid(b, j)) + ", model " + std::to_string(m.pos) + " " +
               std::to_string(m.valid));
        }
        compare_row(
            op, "key", b, j, m.k,
            [&](Index i) { return to_ld(keys(b, j, i / s_.d, i % s_.d)) * k_scale(i / s_.d); },
            s_.d, m.k_roundings, m.k_compute);
        if (!s_.latent) {
          const auto values = cache_.values();
          compare_row(
              op, "value", b, j, m.v,
              [&](Index i) {
                return to_ld(values(b, j, i / s_.dv, i % s_.dv)) * v_scale(i / s_.dv);
              },
              s_.dv, 1, 0.0L);
        }
      }
    }
  }

  template <typename Get>
  void compare_row(int op, const char* what, Index b, Index j, const std::vector<ld>& want, Get got,
                   Index width, int roundings, ld compute) {
    // A rotation mixes the two elements of a pair: bound each element by its head's largest.
    for (Index g = 0; g < s_.kv_heads; ++g) {
      ld top = 0.0L;
      for (Index i = g * width; i < (g + 1) * width; ++i)
        top = std::max(top, std::fabs(want[static_cast<std::size_t>(i)]));
      const ld scale = std::string(what) == "key" ? k_scale(g) : v_scale(g);
      const ld tol = top * (rel_eps<T>() * roundings + compute) + abs_eps<T>() * scale * roundings;
      for (Index i = g * width; i < (g + 1) * width; ++i) {
        const ld w = want[static_cast<std::size_t>(i)], x = got(i);
        if (!(std::fabs(w - x) <= tol)) {
          char buf[256];
          std::snprintf(buf, sizeof buf,
                        "op %d: %s %s[%ld, slot %ld, elem %ld] = %.9Lg, model %.9Lg "
                        "(diff %.3Lg, tol %.3Lg, roundings %d)",
                        op, type_name<T>(), what, static_cast<long>(b), static_cast<long>(j),
                        static_cast<long>(i), x, w, std::fabs(x - w), tol, roundings);
          fail(buf);
        }
      }
    }
  }

  struct Snapshot {
    std::vector<unsigned char> bytes;
    Index size;
    std::int64_t evicted;
    bool rope;
  };
  Snapshot snapshot() const {
    Snapshot s{{}, cache_.size(), cache_.evicted(), cache_.has_rope()};
    auto add = [&](const void* p, std::size_t n) {
      const auto* c = static_cast<const unsigned char*>(p);
      s.bytes.insert(s.bytes.end(), c, c + n);
    };
    const auto k = cache_.keys();
    add(k.data(), static_cast<std::size_t>(k.size()) * sizeof(T));
    if (!s_.latent) {
      const auto v = cache_.values();
      add(v.data(), static_cast<std::size_t>(v.size()) * sizeof(T));
    }
    add(cache_.positions().data(), static_cast<std::size_t>(s_.batch * s_.max_len) * 8);
    add(cache_.valid().data(), static_cast<std::size_t>(s_.batch * s_.max_len));
    return s;
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
    const Snapshot after = snapshot();
    if (after.bytes != before.bytes || after.size != before.size ||
        after.evicted != before.evicted || after.rope != before.rope) {
      fail(std::string(what) + ": threw but changed the cache");
    }
  }

  void erase() {
    const Index first = in_.in(0, size()), count = in_.in(0, size() - first);
    cache_.erase(first, count);
    for (auto& m : model_) m.erase(m.begin() + first, m.begin() + first + count);
  }

  void shift() {
    const Index first = in_.in(0, size()), last = in_.in(first, size());
    std::int64_t delta = in_.in(-300, 300);
    if (in_.chance(10)) delta = in_.in(-(std::int64_t{1} << 23), std::int64_t{1} << 23);
    bool ok = true;
    for (const auto& m : model_) {
      for (Index s = first; s < last; ++s) {
        const std::int64_t p = m[static_cast<std::size_t>(s)].pos + delta;
        ok = ok && p >= 0 && p <= (std::int64_t{1} << 53);
      }
    }
    if (!ok) {
      expect_throw<std::invalid_argument>("shift_positions out of range",
                                          [&] { cache_.shift_positions(first, last, delta); });
      return;
    }
    cache_.shift_positions(first, last, delta);
    if (last == first || delta == 0) return;
    for (auto& m : model_) {
      for (Index s = first; s < last; ++s) {
        Slot& slot = m[static_cast<std::size_t>(s)];
        slot.pos += delta;
        if (plan_) {
          rotate_ld(slot.k, s_.kv_heads, s_.d, static_cast<ld>(delta), plan_->freqs, plan_->layout,
                    1.0L);
          ++slot.k_roundings;
          slot.k_compute += compute_eps<T>();
        }
      }
    }
  }

  void set_rope() {
    auto p = make_plan();
    if (!p) return;
    cache_.set_rope(p->freqs, p->layout);
    plan_ = p;
  }

  void update_rope() {
    auto p = make_plan();
    if (!p) return;
    if (!plan_ || p->freqs.rotary_dim != plan_->freqs.rotary_dim ||
        p->freqs.rotary_offset != plan_->freqs.rotary_offset) {
      expect_throw<std::invalid_argument>("update_rope of another slice / without a plan",
                                          [&] { cache_.update_rope(p->freqs); });
      return;
    }
    cache_.update_rope(p->freqs);
    p->layout = plan_->layout;  // update_rope keeps the cache's layout
    for (auto& m : model_) {
      for (auto& slot : m) {
        rotate_ld(slot.k, s_.kv_heads, s_.d, -static_cast<ld>(slot.pos), plan_->freqs,
                  plan_->layout, 1.0L / static_cast<ld>(plan_->freqs.attention_factor));
        rotate_ld(slot.k, s_.kv_heads, s_.d, static_cast<ld>(slot.pos), p->freqs, p->layout,
                  static_cast<ld>(p->freqs.attention_factor));
        ++slot.k_roundings;
        // update_rope turns by p (w_to - w_from) (rerotate_rope_inplace), the model by fl(p w_to) -
        // fl(p w_from): they differ by a few ulps of p w, w <= 1 here.
        slot.k_compute += 2 * compute_eps<T>() + 0x1.0p-50L * static_cast<ld>(slot.pos);
      }
    }
    plan_ = p;
  }

  // --- attend -----------------------------------------------------------------------------------

  void attend() {
    if (size() == 0) return;
    const bool tree = in_.chance(15);
    const Index q_len = in_.chance(50) ? 1 : in_.in(1, size());
    const Index heads = s_.kv_heads * s_.group;
    posenc::AttentionParams params =
        make_params(in_, val_, heads, tree, s_.latent, s_.window, s_.max_len + 2);
    std::vector<std::uint8_t> mask;
    if (tree) {
      mask.assign(static_cast<std::size_t>(s_.batch * q_len * q_len), 0);
      for (Index b = 0; b < s_.batch; ++b) {
        for (Index i = 0; i < q_len; ++i) {
          // A tree: each draft token's parent is an earlier one (or the prefix).
          const Index parent = i == 0 ? -1 : in_.in(-1, i - 1);
          auto* row = mask.data() + (b * q_len + i) * q_len;
          if (parent >= 0)
            std::memcpy(row, mask.data() + (b * q_len + parent) * q_len,
                        static_cast<std::size_t>(q_len));
          row[i] = 1;
        }
      }
      if (params.sliding_window > 0) {
        Index deepest = 0;
        for (Index r = 0; r < s_.batch * q_len; ++r) {
          deepest = std::max<Index>(
              deepest, std::count(mask.begin() + r * q_len, mask.begin() + (r + 1) * q_len, 1));
        }
        if (deepest > params.sliding_window) {
          if (s_.window > 0 && deepest > s_.window) return;  // no window of this cache fits
          params.sliding_window = deepest + in_.in(0, 3);
          if (s_.window > 0)
            params.sliding_window = std::min<std::int64_t>(params.sliding_window, s_.window);
        }
      }
    }
    switch (in_.in(0, 5)) {
      case 0:
        attend_as<double>(q_len, heads, params, mask);
        break;
      case 1:
        attend_as<Eigen::bfloat16>(q_len, heads, params, mask);
        break;
      case 2:
        attend_as<Eigen::half>(q_len, heads, params, mask);
        break;
      default:
        attend_as<float>(q_len, heads, params, mask);
        break;
    }
  }

  template <typename TQ>
  void attend_as(Index q_len, Index heads, const posenc::AttentionParams& params,
                 const std::vector<std::uint8_t>& tree) {
    using L = posenc::lse_t<TQ>;
    g_context = describe_call(params, q_len, heads, !tree.empty());
    std::vector<TQ> q(static_cast<std::size_t>(s_.batch * q_len * heads * s_.d));
    for (auto& x : q) x = static_cast<TQ>(static_cast<float>(between(val_, -1.0, 1.0)));
    std::vector<TQ> out(static_cast<std::size_t>(s_.batch * q_len * heads * s_.dv),
                        static_cast<TQ>(-7.0f));
    const bool want_lse = in_.chance(40);
    std::vector<L> lse(static_cast<std::size_t>(s_.batch * q_len * heads), L(-9));
    posenc::ConstTensorView<TQ, 4> qt(q.data(), s_.batch, q_len, heads, s_.d);
    posenc::TensorView<TQ, 4> ot(out.data(), s_.batch, q_len, heads, s_.dv);
    std::optional<posenc::TensorView<L, 3>> lt;
    if (want_lse) lt = posenc::TensorView<L, 3>(lse.data(), s_.batch, q_len, heads);
    if (tree.empty()) {
      cache_.attend(qt, ot, params, lt);
    } else {
      posenc::ConstTensorView<std::uint8_t, 3> mt(tree.data(), s_.batch, q_len, q_len);
      cache_.attend(qt, ot, mt, params, lt);
    }

    const Index group = heads / s_.kv_heads;
    const Index n = size();
    const Index first_q = n - q_len;
    const bool causal = params.mask == posenc::MaskMode::kCausal;
    const std::int64_t window = params.sliding_window, chunk = params.attention_chunk_size;
    for (Index b = 0; b < s_.batch; ++b) {
      const auto& m = model_[static_cast<std::size_t>(b)];
      for (Index i = 0; i < q_len; ++i) {
        const Index a = first_q + i;  // the query's own slot
        const std::int64_t qpos = m[static_cast<std::size_t>(a)].pos;
        const std::uint8_t* trow = tree.empty() ? nullptr : tree.data() + (b * q_len + i) * q_len;
        const Index depth = trow ? std::count(trow, trow + q_len, 1) : 0;
        for (Index h = 0; h < heads; ++h) {
          const Index g = h / group;
          // The keys this row sees (attention_types.hpp): valid slots; causal j <= a; a tree row
          // its ancestors among the drafts and the prefix's last W - depth slots; a window of slots
          // a - j < W (|a - j| bidirectional); the same chunk of positions.
          std::vector<SeenKey> seen;
          for (Index j = 0; j < n; ++j) {
            const Slot& kslot = m[static_cast<std::size_t>(j)];
            if (!kslot.valid || (causal && j > a)) continue;
            if (trow && j >= first_q && trow[j - first_q] == 0) continue;
            if (window > 0) {
              if (trow && j < first_q && first_q - j > window - depth) continue;
              if (!trow && (causal ? a - j : std::abs(a - j)) >= window) continue;
            }
            if (chunk > 0 && qpos / chunk != kslot.pos / chunk) continue;
            SeenKey key{kslot.pos, {}, {}};
            for (Index c = 0; c < s_.d; ++c) key.k.push_back(key_at(b, j, g, c));
            for (Index c = 0; c < s_.dv; ++c) key.v.push_back(value_at(b, j, g, c));
            seen.push_back(std::move(key));
          }
          std::vector<ld> qv(static_cast<std::size_t>(s_.d));
          const auto row = (b * q_len + i) * heads + h;
          for (Index c = 0; c < s_.d; ++c) {
            qv[static_cast<std::size_t>(c)] = to_ld(q[static_cast<std::size_t>(row * s_.d + c)]);
          }
          if (plan_) {
            rotate_ld(qv, 1, s_.d, static_cast<ld>(qpos), plan_->freqs, plan_->layout,
                      static_cast<ld>(plan_->freqs.attention_factor));
          }
          check_attention_row(qv, row_scale(params, plan_, s_.d, qpos), qpos, seen, params, h,
                              out.data() + row * s_.dv, s_.dv,
                              want_lse ? lse.data() + row : static_cast<const L*>(nullptr),
                              std::string("attend ") + type_name<T>() + " cache, b " +
                                  std::to_string(b) + " i " + std::to_string(i));
        }
      }
    }
  }

  std::string describe_call(const posenc::AttentionParams& p, Index q_len, Index heads,
                            bool tree) const {
    std::string d = "batch " + std::to_string(s_.batch) + " max_len " + std::to_string(s_.max_len) +
                    " kv_heads " + std::to_string(s_.kv_heads) + " heads " + std::to_string(heads) +
                    " d " + std::to_string(s_.d) + " dv " + std::to_string(s_.dv) +
                    " window(cache) " + std::to_string(s_.window) + (s_.latent ? " latent" : "") +
                    " q_len " + std::to_string(q_len) + (tree ? " tree" : "") + " evicted " +
                    std::to_string(evicted_) + " " + describe(p, plan_) + "\n  positions (b 0):";
    for (const auto& slot : model_[0]) {
      d += " " + std::to_string(slot.pos) + (slot.valid ? "" : "p");
    }
    return d;
  }

  ld key_at(Index b, Index j, Index g, Index c) const {
    return to_ld(cache_.keys()(b, j, g, c)) * k_scale(g);
  }
  ld value_at(Index b, Index j, Index g, Index c) const {
    if (s_.latent) return key_at(b, j, g, c);
    return to_ld(cache_.values()(b, j, g, c)) * v_scale(g);
  }

  // --- invalid calls ----------------------------------------------------------------------------

  void invalid_call() {
    const Index heads = s_.kv_heads * s_.group;
    std::vector<float> q(
        static_cast<std::size_t>(s_.batch * (size() + 2) * (heads + 1) * (s_.d + 1)), 0.5f);
    std::vector<float> out(
        static_cast<std::size_t>(s_.batch * (size() + 2) * (heads + 1) * (s_.dv + 1)), -7.0f);
    const std::vector<float> out_before = out;
    const Index q_len = size() > 0 ? 1 : 1;
    posenc::AttentionParams params;
    if (s_.latent) params.scale = 0.1;
    if (s_.window > 0) params.sliding_window = s_.window;
    switch (in_.in(0, 8)) {
      case 0: {  // q_len past the cache
        posenc::ConstTensorView<float, 4> qt(q.data(), s_.batch, size() + 1, heads, s_.d);
        posenc::TensorView<float, 4> ot(out.data(), s_.batch, size() + 1, heads, s_.dv);
        expect_throw<std::invalid_argument>("attend q_len > size",
                                            [&] { cache_.attend(qt, ot, params); });
        break;
      }
      case 1: {  // slopes of the wrong count
        if (size() == 0) return;
        params.alibi_slopes.assign(static_cast<std::size_t>(heads + 1), 0.5);
        posenc::ConstTensorView<float, 4> qt(q.data(), s_.batch, q_len, heads, s_.d);
        posenc::TensorView<float, 4> ot(out.data(), s_.batch, q_len, heads, s_.dv);
        expect_throw<std::invalid_argument>("attend slopes",
                                            [&] { cache_.attend(qt, ot, params); });
        break;
      }
      case 2: {  // a window wider than the rolling cache's, or a latent cache
                 // without a scale
        if (size() == 0 || (s_.window == 0 && !s_.latent)) return;
        if (s_.window > 0)
          params.sliding_window = s_.window + 1;
        else
          params.scale.reset();
        posenc::ConstTensorView<float, 4> qt(q.data(), s_.batch, q_len, heads, s_.d);
        posenc::TensorView<float, 4> ot(out.data(), s_.batch, q_len, heads, s_.dv);
        expect_throw<std::invalid_argument>("attend window / latent scale",
                                            [&] { cache_.attend(qt, ot, params); });
        break;
      }
      case 3: {  // a tree mask with an entry above its diagonal
        if (size() < 2) return;
        std::vector<std::uint8_t> mask(static_cast<std::size_t>(s_.batch * 4), 1);
        posenc::ConstTensorView<float, 4> qt(q.data(), s_.batch, 2, heads, s_.d);
        posenc::TensorView<float, 4> ot(out.data(), s_.batch, 2, heads, s_.dv);
        posenc::ConstTensorView<std::uint8_t, 3> mt(mask.data(), s_.batch, 2, 2);
        expect_throw<std::invalid_argument>("attend tree above diagonal",
                                            [&] { cache_.attend(qt, ot, mt, params); });
        break;
      }
      case 4: {  // a negative position (checked after the fit)
        if (s_.window == 0 && size() == s_.max_len) return;
        std::vector<float> k(static_cast<std::size_t>(s_.batch * row_k()), 1.0f),
            v(static_cast<std::size_t>(s_.batch * row_v()), 1.0f);
        std::vector<std::int64_t> pos(static_cast<std::size_t>(s_.batch), 3);
        pos[static_cast<std::size_t>(in_.in(0, s_.batch - 1))] = -1 - in_.in(0, 5);
        posenc::ConstTensorView<float, 4> kt(k.data(), s_.batch, 1, s_.kv_heads, s_.d);
        posenc::ConstTensorView<float, 4> vt(v.data(), s_.batch, 1, s_.kv_heads, s_.dv);
        posenc::PositionIdsView pt(pos.data(), s_.batch, 1);
        expect_throw<std::invalid_argument>("append negative position", [&] {
          if (s_.latent)
            cache_.append_latent(kt, pt);
          else
            cache_.append(kt, vt, pt);
        });
        break;
      }
      case 5: {  // keys of the wrong width
        std::vector<float> k(static_cast<std::size_t>(s_.batch * (row_k() + s_.kv_heads)), 1.0f),
            v(static_cast<std::size_t>(s_.batch * row_v()), 1.0f);
        std::vector<std::int64_t> pos(static_cast<std::size_t>(s_.batch), 3);
        posenc::ConstTensorView<float, 4> kt(k.data(), s_.batch, 1, s_.kv_heads, s_.d + 1);
        posenc::ConstTensorView<float, 4> vt(v.data(), s_.batch, 1, s_.kv_heads, s_.dv);
        posenc::PositionIdsView pt(pos.data(), s_.batch, 1);
        expect_throw<std::invalid_argument>("append key width", [&] {
          if (s_.latent)
            cache_.append_latent(kt, pt);
          else
            cache_.append(kt, vt, pt);
        });
        break;
      }
      case 6: {  // erase past the end
        expect_throw<std::invalid_argument>("erase past size",
                                            [&] { cache_.erase(in_.in(0, size()), size() + 1); });
        break;
      }
      case 7: {  // an lse of the wrong shape
        if (size() == 0) return;
        std::vector<float> lse(static_cast<std::size_t>(s_.batch * (heads + 1)), -9.0f);
        posenc::ConstTensorView<float, 4> qt(q.data(), s_.batch, q_len, heads, s_.d);
        posenc::TensorView<float, 4> ot(out.data(), s_.batch, q_len, heads, s_.dv);
        posenc::TensorView<float, 3> lt(lse.data(), s_.batch, q_len, heads + 1);
        const auto lse_before = lse;
        expect_throw<std::invalid_argument>("attend lse shape",
                                            [&] { cache_.attend(qt, ot, params, lt); });
        if (lse != lse_before) fail("attend lse shape: wrote lse");
        break;
      }
      default: {  // a plan wider than the head
        posenc::RopeFrequencies f;
        f.rotary_dim = 2 * (s_.d / 2 + 1);
        f.inv_freq.assign(static_cast<std::size_t>(f.rotary_dim / 2), 0.5);
        expect_throw<std::invalid_argument>(
            "set_rope too wide", [&] { cache_.set_rope(f, posenc::RopeLayout::kHalfSplit); });
        break;
      }
    }
    if (std::memcmp(out.data(), out_before.data(), out.size() * sizeof(float)) != 0) {
      fail("an invalid call wrote out");
    }
  }

  void check_state(int op) {
    if (cache_.size() != size()) {
      fail("op " + std::to_string(op) + ": size() = " + std::to_string(cache_.size()) + ", model " +
           std::to_string(size()));
    }
    if (cache_.evicted() != evicted_) {
      fail("op " + std::to_string(op) + ": evicted() = " + std::to_string(cache_.evicted()) +
           ", model " + std::to_string(evicted_));
    }
    if (cache_.has_rope() != plan_.has_value()) fail("has_rope() disagrees with the model");
    check_rows(op);
  }

  Choices& in_;
  Values& val_;
  Shape s_;
  posenc::KvCache<T> cache_;
  std::vector<std::vector<Slot>> model_;
  std::optional<Plan> plan_;
  std::int64_t evicted_ = 0;
};

template <typename T>
void run_with(Choices& in, Values& val, Shape s) {
  if constexpr (posenc::detail::is_float8_v<T>) {
    // FP8 caches store no double; their latent rows work as any other.
  }
  Harness<T> h(in, val, s);
  h.run();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Choices in(data, size);
  std::uint64_t seed = 0;
  for (int i = 0; i < 4; ++i) seed = (seed << 8) | in.byte();
  Values val(seed);
  static constexpr Index kDims[] = {2, 4, 6, 8, 16, 18, 32, 64};
  Shape s{};
  s.batch = in.in(1, 3);
  s.max_len = in.in(1, 48);
  s.kv_heads = in.in(1, 3);
  s.group = in.in(1, 4);
  s.d = kDims[in.in(0, 7)];
  s.latent = in.chance(15);
  if (s.latent) {
    s.dv = in.in(1, s.d);
  } else {
    s.dv = in.chance(70) ? s.d : kDims[in.in(0, 7)];
  }
  s.window = in.chance(25) ? in.in(1, s.max_len) : 0;
  switch (in.in(0, 7)) {
    case 0:
      run_with<double>(in, val, s);
      break;
    case 1:
      run_with<Eigen::bfloat16>(in, val, s);
      break;
    case 2:
      run_with<Eigen::half>(in, val, s);
      break;
    case 3:
      run_with<posenc::float8_e4m3>(in, val, s);
      break;
    case 4:
      run_with<posenc::float8_e5m2>(in, val, s);
      break;
    default:
      run_with<float>(in, val, s);
      break;
  }
  return 0;
}

#ifdef POSENC_FUZZ_MAIN
#include "driver.hpp"
int main(int argc, char** argv) {
  const long runs = posenc_fuzz::run_random_inputs(argc, argv, 512, [](std::uint64_t seed) {
    if (seed % 100 == 0) std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(seed));
  });
  std::fprintf(stderr, "%ld runs, no mismatch\n", runs);
  return 0;
}
#endif
