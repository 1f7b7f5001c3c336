// libFuzzer target for the attention calls fuzz_attention.cpp does not reach (scripts/fuzz.sh
// builds and runs it):
//  - merge_attention_state_inplace (attention_merge.hpp) over float / double / half / bfloat16
//    states, lse values from the whole range (finite, -inf for a part that saw no key, NaN for a
//    part that met a NaN logit, +inf which no state has): against the merge written out in
//    long double from the file comment's formula (NaN in either part -> NaN row; two empty
//    parts -> out 0, lse -inf), within the accumulation type's rounding plus one rounding to T;
//    rejected calls throw std::invalid_argument and write nothing;
//  - attention_latent (attention_mla.hpp): the values are the first v_head_dim elements of each
//    kv row, read in place, so its output must be bit-identical to attention() given those
//    elements copied out as V, for every option both take (masks, windows, chunks, ALiBi, soft
//    cap, sinks, padding, positions, GQA, threads); a call one rejects the other rejects with the
//    same exception type, and neither writes.
//
// Without libFuzzer (-DPOSENC_FUZZ_MAIN) the file builds a driver that runs random inputs:
//   g++ -std=c++17 -O2 -DPOSENC_FUZZ_MAIN -pthread -I include -isystem /usr/include/eigen3
//       tests/fuzz/fuzz_attention_state.cpp -o fuzz_attention_state   (./fuzz_attention_state
//       20000)

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <posenc/attention.hpp>
#include <posenc/attention_merge.hpp>
#include <posenc/attention_mla.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "fuzz_support.hpp"

namespace {

using posenc_fuzz::Choices;
using Index = Eigen::Index;
using ld = long double;

std::string g_context;
/// The standalone driver's seed of this input (0 under libFuzzer): `./target 1 SEED` replays it.
std::uint64_t g_seed = 0;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_attention_state (seed %llu): %s\n  context: %s\n",
               static_cast<unsigned long long>(g_seed), what.c_str(), g_context.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  if constexpr (std::is_same_v<T, Eigen::half>) return "half";
  return "bfloat16";
}

template <typename T>
ld wide(T x) {
  return static_cast<ld>(static_cast<double>(x));
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// Unit roundoff of T's significand (storage rounding).
template <typename T>
double unit_roundoff() {
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    return 0x1p-8;
  } else if constexpr (std::is_same_v<T, Eigen::half>) {
    return 0x1p-11;
  } else {
    return std::numeric_limits<T>::epsilon() / 2;
  }
}

// ------------------------------------------------------------------------------------------
// merge_attention_state_inplace
// ------------------------------------------------------------------------------------------

template <typename Acc>
Acc draw_lse(Choices& in) {
  switch (in.in(0, 11)) {
    case 0:
      return -std::numeric_limits<Acc>::infinity();
    case 1:
      return std::numeric_limits<Acc>::quiet_NaN();
    case 2:
      return static_cast<Acc>(in.in(-3, 3));  // ties between the parts
    case 3:
      return static_cast<Acc>(
          std::ldexp(in.chance(50) ? 1.0 : -1.0, static_cast<int>(in.in(-20, 100))));
    default:
      return static_cast<Acc>(static_cast<double>(in.in(-4000, 4000)) / 100.0);
  }
}

template <typename T>
void run_merge(Choices& in) {
  using Acc = posenc::lse_t<T>;
  const Index batch = in.in(1, 2), q_len = in.in(1, 3), heads = in.in(1, 3), d = in.in(1, 9);
  const Index rows = batch * q_len * heads;
  std::vector<T> out(static_cast<std::size_t>(rows * d)), other(out.size());
  std::vector<Acc> lse(static_cast<std::size_t>(rows)), other_lse(lse.size());
  for (auto* v : {&out, &other}) {
    for (auto& x : *v) x = T(static_cast<float>(in.in(-1000, 1000)) / 64.0f);
  }
  for (auto& x : lse) x = draw_lse<Acc>(in);
  for (auto& x : other_lse) x = draw_lse<Acc>(in);
  const bool plus_inf = in.chance(5);
  if (plus_inf) {
    auto& target = in.chance(50) ? lse : other_lse;
    target[static_cast<std::size_t>(in.in(0, rows - 1))] = std::numeric_limits<Acc>::infinity();
  }
  const bool bad_shape = in.chance(5);
  const Index other_heads = bad_shape ? heads + 1 : heads;
  if (bad_shape) other.resize(static_cast<std::size_t>(batch * q_len * other_heads * d));
  g_context = std::string("merge ") + type_name<T>() + " rows " + std::to_string(rows) + " d " +
              std::to_string(d) + (plus_inf ? " +inf lse" : "") + (bad_shape ? " bad shape" : "");

  const std::vector<T> out0 = out;
  const std::vector<Acc> lse0 = lse;
  bool threw = false;
  try {
    posenc::merge_attention_state_inplace<T>(
        posenc::TensorView<T, 4>(out.data(), batch, q_len, heads, d),
        posenc::TensorView<Acc, 3>(lse.data(), batch, q_len, heads),
        posenc::ConstTensorView<T, 4>(other.data(), batch, q_len, other_heads, d),
        posenc::ConstTensorView<Acc, 3>(other_lse.data(), batch, q_len, heads));
  } catch (const std::invalid_argument& e) {
    threw = true;
    if (std::string(e.what()).rfind("posenc::merge_attention_state_inplace:", 0) != 0) {
      fail(std::string("message: ") + e.what());
    }
  }
  if (threw != (plus_inf || bad_shape)) fail(threw ? "rejected a valid merge" : "accepted +inf");
  if (threw) {
    if (!same_bits(out, out0) || !same_bits(lse, lse0)) fail("wrote before throwing");
    return;
  }
  const double u_acc = std::numeric_limits<Acc>::epsilon();
  for (Index r = 0; r < rows; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    const ld la = lse0[ri], lb = other_lse[ri];
    ld want_lse = 0;
    std::vector<ld> want(static_cast<std::size_t>(d));
    ld scale = 0;  // |out_a| + |out_b| of the row, for the bound
    for (Index c = 0; c < d; ++c) {
      const auto i = static_cast<std::size_t>(r * d + c);
      scale = std::max(scale, std::fabs(wide(out0[i])) + std::fabs(wide(other[i])));
    }
    if (std::isnan(la) || std::isnan(lb)) {
      want_lse = std::numeric_limits<ld>::quiet_NaN();
      std::fill(want.begin(), want.end(), std::numeric_limits<ld>::quiet_NaN());
    } else if (la == -INFINITY && lb == -INFINITY) {
      want_lse = -INFINITY;
    } else {
      const ld top = std::max(la, lb);
      const ld wa = std::exp(la - top), wb = std::exp(lb - top);
      want_lse = top + std::log(wa + wb);
      for (Index c = 0; c < d; ++c) {
        const auto i = static_cast<std::size_t>(r * d + c);
        want[static_cast<std::size_t>(c)] = (wa * wide(out0[i]) + wb * wide(other[i])) / (wa + wb);
      }
    }
    const ld got_lse = lse[ri];
    const std::string at = " row " + std::to_string(r) + " lse " + std::to_string(double(la)) +
                           " / " + std::to_string(double(lb));
    if (std::isnan(want_lse) != std::isnan(got_lse)) fail("lse NaN-ness" + at);
    if (!std::isnan(want_lse)) {
      const ld tol = 8.0L * u_acc * (std::fabs(std::isinf(want_lse) ? 0 : want_lse) + 2.0L);
      if (!(got_lse == want_lse || std::fabs(got_lse - want_lse) <= tol)) {
        fail("lse " + std::to_string(double(got_lse)) + " want " +
             std::to_string(double(want_lse)) + at);
      }
    }
    for (Index c = 0; c < d; ++c) {
      const ld got = wide(out[static_cast<std::size_t>(r * d + c)]);
      const ld w = want[static_cast<std::size_t>(c)];
      if (std::isnan(w) != std::isnan(got)) fail("out NaN-ness" + at);
      if (std::isnan(w)) continue;
      const ld tol = 8.0L * u_acc * scale + 1.01L * unit_roundoff<T>() * std::fabs(w) + 1e-30L;
      if (std::fabs(got - w) > tol) {
        fail("out " + std::to_string(double(got)) + " want " + std::to_string(double(w)) + at);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------
// attention_latent == attention with the values copied out
// ------------------------------------------------------------------------------------------

struct LatentCall {
  posenc::AttentionParams params;
  std::vector<std::int64_t> key_lengths, q_pos, k_pos;
  std::vector<std::uint8_t> key_mask;
  bool use_lengths = false, use_mask = false, use_positions = false;
};

template <typename T>
void run_latent(Choices& in) {
  const Index batch = in.in(1, 2), kv_heads = in.in(1, 2), group = in.in(1, 3);
  const Index heads = kv_heads * group, k_len = in.in(1, 40), q_len = in.in(1, 12);
  const Index d = in.in(1, 40), dv = in.chance(90) ? in.in(1, d) : d + 1;
  LatentCall call;
  auto& p = call.params;
  p.mask = in.chance(75) ? posenc::MaskMode::kCausal : posenc::MaskMode::kBidirectional;
  if (in.chance(95)) p.scale = 0.05 + static_cast<double>(in.in(0, 100)) / 200.0;
  if (in.chance(25)) {
    for (Index h = 0; h < heads; ++h) p.alibi_slopes.push_back(std::ldexp(1.0, -int(in.in(0, 8))));
  }
  if (in.chance(20)) p.logit_softcap = static_cast<double>(in.in(1, 50));
  if (in.chance(20)) {
    for (Index h = 0; h < heads; ++h) p.sink_logits.push_back(static_cast<double>(in.in(-8, 8)));
  }
  if (in.chance(20)) p.sliding_window = in.in(1, 16);
  if (in.chance(10)) p.attention_chunk_size = in.in(1, 16);
  p.num_threads = static_cast<int>(in.in(1, 3));
  call.use_lengths = in.chance(25);
  for (Index b = 0; b < batch; ++b) call.key_lengths.push_back(in.in(0, k_len));
  call.use_mask = in.chance(20);
  for (Index i = 0; i < batch * k_len; ++i) call.key_mask.push_back(in.chance(85) ? 1 : 0);
  call.use_positions = in.chance(25);
  for (Index b = 0; b < batch; ++b) {
    const std::int64_t start = in.chance(80) ? in.in(0, 50) : (std::int64_t{1} << 40);
    for (Index j = 0; j < k_len; ++j) call.k_pos.push_back(start + j);
    for (Index i = 0; i < q_len; ++i) call.q_pos.push_back(start + k_len - q_len + i);
  }
  posenc::AttentionMetadata meta;
  if (call.use_lengths) {
    meta.key_lengths = posenc::ConstTensorView<std::int64_t, 1>(call.key_lengths.data(), batch);
  }
  if (call.use_mask) {
    meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(call.key_mask.data(), batch, k_len);
  }
  if (call.use_positions) {
    meta.key_positions = posenc::PositionIdsView(call.k_pos.data(), batch, k_len);
    meta.query_positions = posenc::PositionIdsView(call.q_pos.data(), batch, q_len);
  }
  std::vector<T> q(static_cast<std::size_t>(batch * q_len * heads * d));
  std::vector<T> kv(static_cast<std::size_t>(batch * k_len * kv_heads * d));
  posenc_fuzz::Values values(static_cast<std::uint64_t>(in.in(0, 1 << 30)));
  for (auto& x : q) x = T(static_cast<float>(values.uniform()));
  for (auto& x : kv) x = T(static_cast<float>(values.uniform() * 2.0));
  if (in.chance(10)) kv[static_cast<std::size_t>(in.in(0, Index(kv.size()) - 1))] = T(NAN);
  const Index dv_copy = std::min(dv, d);
  std::vector<T> v(static_cast<std::size_t>(batch * k_len * kv_heads * dv_copy));
  for (Index row = 0; row < batch * k_len * kv_heads; ++row) {
    std::copy_n(kv.begin() + row * d, dv_copy, v.begin() + row * dv_copy);
  }
  const T sentinel = T(-7.25f);
  std::vector<T> out_latent(static_cast<std::size_t>(batch * q_len * heads * dv), sentinel);
  std::vector<T> out_plain(static_cast<std::size_t>(batch * q_len * heads * dv_copy), sentinel);
  g_context = std::string("latent ") + type_name<T>() + " b " + std::to_string(batch) + " q " +
              std::to_string(q_len) + " k " + std::to_string(k_len) + " heads " +
              std::to_string(heads) + "/" + std::to_string(kv_heads) + " d " + std::to_string(d) +
              " dv " + std::to_string(dv) + " causal " +
              std::to_string(p.mask == posenc::MaskMode::kCausal) + " scale " +
              (p.scale ? std::to_string(*p.scale) : "unset") + " alibi " +
              std::to_string(!p.alibi_slopes.empty()) + " cap " + std::to_string(p.logit_softcap) +
              " sinks " + std::to_string(!p.sink_logits.empty()) + " window " +
              std::to_string(p.sliding_window) + " chunk " +
              std::to_string(p.attention_chunk_size) + " threads " + std::to_string(p.num_threads) +
              " lengths/mask/positions " + std::to_string(call.use_lengths) +
              std::to_string(call.use_mask) + std::to_string(call.use_positions);

  const auto outcome = [&](auto&& f) -> std::string {
    try {
      f();
      return "";
    } catch (const std::invalid_argument&) {
      return "invalid_argument";
    } catch (const std::out_of_range&) {
      return "out_of_range";
    } catch (const std::exception& e) {
      fail(std::string("another exception: ") + typeid(e).name() + ": " + e.what());
    }
  };
  const std::string latent = outcome([&] {
    posenc::attention_latent<T>(
        posenc::ConstTensorView<T, 4>(q.data(), batch, q_len, heads, d),
        posenc::ConstTensorView<T, 4>(kv.data(), batch, k_len, kv_heads, d),
        posenc::TensorView<T, 4>(out_latent.data(), batch, q_len, heads, dv), p, meta);
  });
  const bool latent_only_error = dv > d || !p.scale;
  if (latent_only_error) {
    if (latent != "invalid_argument") fail("v_head_dim > head_dim or an unset scale accepted");
  } else {
    const std::string plain = outcome([&] {
      posenc::attention<T>(posenc::ConstTensorView<T, 4>(q.data(), batch, q_len, heads, d),
                           posenc::ConstTensorView<T, 4>(kv.data(), batch, k_len, kv_heads, d),
                           posenc::ConstTensorView<T, 4>(v.data(), batch, k_len, kv_heads, dv),
                           posenc::TensorView<T, 4>(out_plain.data(), batch, q_len, heads, dv), p,
                           meta);
    });
    if (latent != plain) fail("latent " + latent + ", plain attention " + plain);
    if (latent.empty() && !same_bits(out_latent, out_plain)) {
      for (std::size_t i = 0; i < out_latent.size(); ++i) {
        if (std::memcmp(&out_latent[i], &out_plain[i], sizeof(T)) != 0) {
          fail("out[" + std::to_string(i) + "] latent " +
               std::to_string(static_cast<double>(out_latent[i])) + ", plain " +
               std::to_string(static_cast<double>(out_plain[i])));
        }
      }
    }
  }
  if (!latent.empty()) {
    for (const T& x : out_latent) {
      if (std::memcmp(&x, &sentinel, sizeof(T)) != 0) fail("attention_latent wrote, then threw");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Choices in(data, size);
  const int type = static_cast<int>(in.in(0, 3));
  const bool merge = in.chance(50);
  switch (type) {
    case 0:
      merge ? run_merge<float>(in) : run_latent<float>(in);
      break;
    case 1:
      merge ? run_merge<double>(in) : run_latent<double>(in);
      break;
    case 2:
      merge ? run_merge<Eigen::half>(in) : run_latent<Eigen::half>(in);
      break;
    default:
      merge ? run_merge<Eigen::bfloat16>(in) : run_latent<Eigen::bfloat16>(in);
      break;
  }
  return 0;
}

#ifdef POSENC_FUZZ_MAIN
#include "driver.hpp"
int main(int argc, char** argv) {
  const bool verbose = std::getenv("FZS_VERBOSE") != nullptr;
  const long runs = posenc_fuzz::run_random_inputs(argc, argv, 512, [&](std::uint64_t seed) {
    g_seed = seed;
    if (verbose) std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(seed));
  });
  std::printf("%ld runs, no mismatch\n", runs);
  return 0;
}
#endif
