#!/usr/bin/env bash
# pkg_config_consumer.sh <install prefix> <c++ compiler> <consumer.cpp> <build dir> [emulator...]
# Builds the consumer the way a Makefile would, with only `pkg-config --cflags posenc`, from the
# installed posenc.pc, and runs it (under the emulator in a cross build).
set -euo pipefail
prefix=$1 cxx=$2 source=$3 build=$4
shift 4
export PKG_CONFIG_PATH="$prefix/share/pkgconfig"
echo "posenc.pc version $(pkg-config --modversion posenc), cflags: $(pkg-config --cflags posenc)"
# The relocated includedir must be the prefix's, not a path baked in at configure time.
includedir=$(realpath "$(pkg-config --variable=includedir posenc)")
if [[ $includedir != "$(realpath "$prefix")/include" ]]; then
  echo "includedir $includedir is not under the prefix $prefix"
  exit 1
fi
mkdir -p "$build"
# shellcheck disable=SC2046  # the flags are meant to split into words
"$cxx" -std=c++17 -Wall -Wextra -Werror $(pkg-config --cflags posenc) "$source" \
  -o "$build/consumer"
"$@" "$build/consumer"
