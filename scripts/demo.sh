#!/usr/bin/env bash
# The README's main job: installs deps if missing, builds, runs every example, then a short
# benchmark run whose last lines are the in-run ratio summary (kernel / baseline).
#   POSENC_BENCH_ARGS="--benchmark_filter=Rope" bash scripts/demo.sh   # narrow the benchmarks
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake --workflow --preset demo

for example in build/demo/examples/*; do
  [ -f "$example" ] && [ -x "$example" ] || continue
  echo
  echo "=== example: $(basename "$example") ==="
  "$example"
done

if [ -x build/demo/bin/rope-inspect ]; then
  echo
  echo "=== rope-inspect: Llama-3.1-8B at 131072 tokens ==="
  build/demo/bin/rope-inspect tests/data/hf-configs/Llama-3.1-8B.json --length 131072
fi

echo
echo "=== benchmarks (short run; full sweep: build/demo/bench/posenc_bench) ==="
# shellcheck disable=SC2086  # word splitting of the user's extra flags is intended
build/demo/bench/posenc_bench --benchmark_min_time=0.05 ${POSENC_BENCH_ARGS:-}
