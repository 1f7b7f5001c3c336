#!/usr/bin/env bash
# The README's test command: installs deps if missing, configures, builds and runs every test
# (ctest) through the CMake workflow preset; exits non-zero on any failure.
#   bash scripts/test.sh            # Release build, all tests          (preset "test")
#   bash scripts/test.sh sanitize   # the same tests under ASan + UBSan (preset "sanitize")
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-test}"
bash scripts/deps.sh
cmake --workflow --preset "$preset"
