#!/usr/bin/env bash
# Fuzzes with libFuzzer for a bounded time: the HF config loader (posenc/hf_config.hpp, target
# hf_config), the GGUF reader (posenc/gguf_config.hpp, gguf), or a KV cache against a
# long-double model of it: KvCache (posenc/kv_cache.hpp, kv_cache: appends, attends, erases,
# shifts, RoPE plan changes, invalid calls) or PagedKvCache (posenc/paged_kv_cache.hpp,
# paged_kv_cache: sequences added, forked and released, appends, attends, page accounting),
# or the attention calls against a long-double oracle (posenc/attention*.hpp, attention:
# attention, attention_varlen, attention_paged, attention_paged_varlen and their errors;
# attention_state: merge_attention_state_inplace against long double, attention_latent against
# attention with its values copied out), or RoPE frequency planning against posenc::reference (rope_frequencies.hpp, rope_plan:
# every rope_type over the whole double range, RopePlan updates, with_freq_factors).
#
#   bash scripts/fuzz.sh [seconds] [hf_config|gguf|kv_cache|paged_kv_cache|attention|
#                                   attention_state|rope_plan]
#   (default: $FUZZ_SECONDS or 60 s, hf_config)
#
# Builds tests/fuzz/fuzz_<target>.cpp with clang (-fsanitize=fuzzer,address,undefined) into
# $FUZZ_BUILD_DIR (default build-fuzz/), seeds a working corpus (hf_config: tests/data/hf-configs,
# tests/data/bad-configs and tests/fuzz/corpus, never modified; gguf: the headers
# tests/fuzz/gguf_seeds.cpp writes; the others: none, any bytes are a valid input), and
# runs one libFuzzer job. Exit status is libFuzzer's: 0 when the time ran out without a
# finding; otherwise the crashing input is left in $FUZZ_BUILD_DIR as crash-*/leak-*/timeout-*.
# Needs: clang (Debian clang-14), libeigen3-dev, nlohmann-json3-dev (hf_config).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-${FUZZ_SECONDS:-60}}
target=${2:-hf_config}
out=${FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=${FUZZ_CXX:-}
if [[ -z $cxx ]]; then
  for candidate in clang++-14 clang++; do
    if command -v "$candidate" >/dev/null; then cxx=$candidate; break; fi
  done
fi
[[ -n $cxx ]] || { echo "fuzz.sh: clang++ not found (apt-get install clang-14)" >&2; exit 2; }
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: seconds must be an integer" >&2; exit 2; }
case $target in
  hf_config | gguf | kv_cache | paged_kv_cache | attention | attention_state | rope_plan) ;;
  *) echo "fuzz.sh: target must be hf_config, gguf, kv_cache, paged_kv_cache, attention," \
       "attention_state or rope_plan" >&2
     exit 2 ;;
esac

out=$out/$target
mkdir -p "$out/corpus"
exe=$out/fuzz_$target
echo "fuzz.sh: building $exe with $cxx"
# -O1 -g: fast enough, readable stacks. UBSan findings abort (no recover) so libFuzzer keeps them.
"$cxx" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -fno-omit-frame-pointer -I"$root/include" -I/usr/include/eigen3 \
  "$root/tests/fuzz/fuzz_$target.cpp" -o "$exe"

dict=()
[[ -f $root/tests/fuzz/$target.dict ]] && dict=(-dict="$root/tests/fuzz/$target.dict")
if [[ $target == hf_config ]]; then
  cp "$root"/tests/data/hf-configs/*.json "$root"/tests/data/bad-configs/*.json \
    "$root"/tests/fuzz/corpus/*.json "$out/corpus/"
elif [[ $target == gguf ]]; then
  "$cxx" -std=c++17 -O1 -I"$root/tests" "$root/tests/fuzz/gguf_seeds.cpp" -o "$out/gguf_seeds"
  "$out/gguf_seeds" "$out/corpus"
fi

echo "fuzz.sh: fuzzing for ${seconds}s"
cd "$out"
set +e
max_len=16384
# The KV cache targets read about 600 bytes of choices (24 or 32 operations), attention a few
# dozen (one problem), rope_plan one set of parameters (factor lists: a few hundred).
[[ $target == *kv_cache || $target == attention* || $target == rope_plan ]] && max_len=1024
"$exe" "$out/corpus" "${dict[@]}" -max_total_time="$seconds" \
  -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>&1 | tee "$out/fuzz.log"
rc=${PIPESTATUS[0]}
set -e
execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$out/fuzz.log" | grep -Eo '[0-9]+$' || true)
echo "fuzz.sh: exit $rc, ${execs:-?} executions in ${seconds}s (log: $out/fuzz.log)"
exit "$rc"
