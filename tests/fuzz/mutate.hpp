#pragma once
// The standalone driver of the byte fuzzers (fuzz_hf_config.cpp, fuzz_gguf.cpp), built with
// -DPOSENC_FUZZ_MAIN instead of libFuzzer. Random bytes almost never get past a JSON parser or
// a GGUF magic, so these mutate seed files instead, with a few of the mutations libFuzzer's
// MutationDispatcher makes (Serebryany 2016; its -help=1 list): bit flips, random and
// "interesting" bytes, little-endian integers set to edge values (the lengths and counts of a
// binary format), ranges erased, duplicated or moved, dictionary tokens inserted or written
// over, and a crossover with another seed. Deterministic: input r is made from seed
// FIRST_SEED + r alone, so a failure replays with `target 1 SEED ...`.
//
//   target RUNS FIRST_SEED DICTIONARY SEED_DIRECTORY...
//
// An exception other than the contract's escapes to std::terminate, which prints the seed and
// the exception; a target's trap (SIGILL) prints the seed too; POSENC_FUZZ_VERBOSE=1 prints
// every seed before its run (for a crash), POSENC_FUZZ_DUMP=FILE writes each input to FILE
// before its run (the failing one stays there).

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <unistd.h>

#include "../support/rng.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace posenc_fuzz {

using Bytes = std::vector<std::uint8_t>;

/// The tokens of a libFuzzer dictionary file: one quoted string a line (an optional name= in
/// front), with \\, \" and \xNN escapes; '#' lines and blank lines skipped.
inline std::vector<Bytes> read_dictionary(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open the dictionary " + path);
  std::vector<Bytes> tokens;
  std::string line;
  while (std::getline(in, line)) {
    const auto open = line.find('"');
    const auto close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) continue;
    Bytes token;
    for (std::size_t i = open + 1; i < close; ++i) {
      if (line[i] != '\\' || i + 1 >= close) {
        token.push_back(static_cast<std::uint8_t>(line[i]));
      } else if (line[i + 1] == 'x' && i + 3 < close) {
        token.push_back(static_cast<std::uint8_t>(std::stoi(line.substr(i + 2, 2), nullptr, 16)));
        i += 3;
      } else {
        token.push_back(static_cast<std::uint8_t>(line[++i]));
      }
    }
    tokens.push_back(std::move(token));
  }
  return tokens;
}

/// Every regular file of the directories, in name order (directory order is the file
/// system's, and the inputs must not depend on it).
inline std::vector<Bytes> read_seed_files(const std::vector<std::string>& directories) {
  std::vector<std::filesystem::path> paths;
  for (const auto& d : directories) {
    for (const auto& entry : std::filesystem::directory_iterator(d)) {
      if (entry.is_regular_file()) paths.push_back(entry.path());
    }
  }
  std::sort(paths.begin(), paths.end());
  std::vector<Bytes> seeds;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return seeds;
}

/// A target's own mutation (a structure-aware one, say); false when it did not apply.
using CustomMutation = std::function<bool(posenc_test::SplitMix64&, Bytes&)>;

/// Makes input `seed`: a seed file with 1-4 random mutations, at most max_size bytes.
class Mutator {
 public:
  Mutator(const std::vector<Bytes>& seeds, const std::vector<Bytes>& dictionary,
          std::size_t max_size, CustomMutation custom = {})
      : seeds_(seeds), dictionary_(dictionary), max_size_(max_size), custom_(std::move(custom)) {}

  Bytes make(std::uint64_t seed) const {
    posenc_test::SplitMix64 rng(seed);
    Bytes x = seeds_[below(rng, seeds_.size())];
    const std::size_t steps = 1 + below(rng, 4);
    // Three inputs in four take the target's mutations only (a byte mutation would mostly
    // undo a structure-aware one), the rest byte-level ones only.
    const bool custom = custom_ && below(rng, 4) != 0;
    for (std::size_t i = 0; i < steps; ++i) {
      if (!custom || !custom_(rng, x)) mutate(rng, x);
    }
    if (x.size() > max_size_) x.resize(max_size_);
    return x;
  }

 private:
  static std::size_t below(posenc_test::SplitMix64& rng, std::size_t n) {
    return n == 0 ? 0 : static_cast<std::size_t>(rng.next() % n);
  }

  void mutate(posenc_test::SplitMix64& rng, Bytes& x) const {
    static constexpr std::uint8_t kInterestingBytes[] = {0, 1, 0x7f, 0x80, 0xff, '0', '9', '-',
                                                         '.', 'e', '"', ',', '{', '}', '[', ']'};
    // Edge values of the integers a header counts with (GGUF: u32 / u64 lengths and counts,
    // i32 / u32 values, type tags).
    static constexpr std::uint64_t kInterestingWords[] = {
        0, 1, 2, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff,
        0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull, 12, 13, 64, 4096};
    const std::size_t n = x.size();
    switch (below(rng, 10)) {
      case 0:  // flip a bit
        if (n > 0) x[below(rng, n)] ^= static_cast<std::uint8_t>(1u << below(rng, 8));
        break;
      case 1:  // a random byte
        if (n > 0) x[below(rng, n)] = static_cast<std::uint8_t>(rng.next());
        break;
      case 2:  // an interesting byte
        if (n > 0) x[below(rng, n)] = kInterestingBytes[below(rng, sizeof kInterestingBytes)];
        break;
      case 3: {  // an interesting little-endian integer of 1, 2, 4 or 8 bytes
        const std::size_t width = std::size_t{1} << below(rng, 4);
        if (n < width) break;
        const std::size_t at = below(rng, n - width + 1);
        std::uint64_t v = kInterestingWords[below(rng, std::size(kInterestingWords))];
        if (below(rng, 4) == 0) v = ~v + 1;  // and its negation
        for (std::size_t b = 0; b < width; ++b) x[at + b] = static_cast<std::uint8_t>(v >> (8 * b));
        break;
      }
      case 4: {  // erase a range
        if (n == 0) break;
        const std::size_t at = below(rng, n);
        const std::size_t len = 1 + below(rng, std::min<std::size_t>(n - at, 64));
        x.erase(x.begin() + static_cast<std::ptrdiff_t>(at),
                x.begin() + static_cast<std::ptrdiff_t>(at + len));
        break;
      }
      case 5: {  // duplicate a range in place
        if (n == 0) break;
        const std::size_t at = below(rng, n);
        const std::size_t len = 1 + below(rng, std::min<std::size_t>(n - at, 64));
        const Bytes piece(x.begin() + static_cast<std::ptrdiff_t>(at),
                          x.begin() + static_cast<std::ptrdiff_t>(at + len));
        x.insert(x.begin() + static_cast<std::ptrdiff_t>(at), piece.begin(), piece.end());
        break;
      }
      case 6:
      case 7: {  // a dictionary token, inserted or written over
        if (dictionary_.empty()) break;
        const Bytes& token = dictionary_[below(rng, dictionary_.size())];
        const std::size_t at = below(rng, n + 1);
        if (below(rng, 2) == 0 || at + token.size() > n) {
          x.insert(x.begin() + static_cast<std::ptrdiff_t>(at), token.begin(), token.end());
        } else {
          std::copy(token.begin(), token.end(), x.begin() + static_cast<std::ptrdiff_t>(at));
        }
        break;
      }
      case 8: {  // copy a range over another place of the same input
        if (n < 2) break;
        const std::size_t from = below(rng, n), to = below(rng, n);
        const std::size_t len = 1 + below(rng, std::min<std::size_t>({n - from, n - to, 64}));
        std::memmove(x.data() + to, x.data() + from, len);
        break;
      }
      default: {  // crossover: this input's head, another seed's tail
        const Bytes& other = seeds_[below(rng, seeds_.size())];
        if (other.empty()) break;
        x.resize(below(rng, n + 1));
        const std::size_t from = below(rng, other.size());
        x.insert(x.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
    }
  }

  const std::vector<Bytes>& seeds_;
  const std::vector<Bytes>& dictionary_;
  std::size_t max_size_;
  CustomMutation custom_;
};

inline std::uint64_t g_mutated_seed = 0;
inline char g_seed_line[40] = "seed ?\n";  // formatted before each run: a handler only writes it

extern "C" inline void posenc_fuzz_on_trap(int signal) {
  if (::write(2, g_seed_line, std::strlen(g_seed_line)) < 0) {
    // nothing to do: the process is about to die either way
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

/// Runs the mutated inputs of argv (see the file comment) and prints how many the target
/// accepted (`accepted`, which it counts). Returns the count run, or -1 for a usage error.
inline long run_mutated_seeds(int argc, char** argv, std::size_t max_size, const long& accepted,
                              CustomMutation custom = {}) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s RUNS FIRST_SEED DICTIONARY SEED_DIRECTORY...\n", argv[0]);
    return -1;
  }
  const long runs = std::atol(argv[1]);
  const std::uint64_t first = std::strtoull(argv[2], nullptr, 10);
  const std::vector<Bytes> dictionary = read_dictionary(argv[3]);
  const std::vector<Bytes> seeds = read_seed_files(std::vector<std::string>(argv + 4, argv + argc));
  if (seeds.empty()) {
    std::fprintf(stderr, "no seed files in the directories given\n");
    return -1;
  }
  std::set_terminate([] {
    std::fprintf(stderr, "seed %llu: terminate", static_cast<unsigned long long>(g_mutated_seed));
    try {
      if (const auto e = std::current_exception()) std::rethrow_exception(e);
    } catch (const std::exception& e) {
      std::fprintf(stderr, " on an escaped %s: %s", typeid(e).name(), e.what());
    } catch (...) {
      std::fprintf(stderr, " on an escaped exception of an unknown type");
    }
    std::fprintf(stderr, "\n");
    std::abort();
  });
  std::signal(SIGILL, posenc_fuzz_on_trap);  // __builtin_trap on x86 (ud2)
  std::signal(SIGTRAP, posenc_fuzz_on_trap);  // and on AArch64 (brk)
  const bool verbose = std::getenv("POSENC_FUZZ_VERBOSE") != nullptr;
  const char* dump = std::getenv("POSENC_FUZZ_DUMP");
  const Mutator mutator(seeds, dictionary, max_size, std::move(custom));
  for (long r = 0; r < runs; ++r) {
    g_mutated_seed = first + static_cast<std::uint64_t>(r);
    std::snprintf(g_seed_line, sizeof g_seed_line, "seed %llu\n",
                  static_cast<unsigned long long>(g_mutated_seed));
    if (verbose) {
      std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(g_mutated_seed));
    }
    const Bytes x = mutator.make(g_mutated_seed);
    if (dump != nullptr) {
      std::ofstream(dump, std::ios::binary)
          .write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size()));
    }
    LLVMFuzzerTestOneInput(x.data(), x.size());
  }
  std::printf("%ld mutated inputs from %zu seed files and %zu dictionary tokens\n", runs,
              seeds.size(), dictionary.size());
  std::printf("%ld accepted, %ld rejected (std::invalid_argument)\n", accepted,
              runs - accepted);
  return runs;
}

}  // namespace posenc_fuzz
