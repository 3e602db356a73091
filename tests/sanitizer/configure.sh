#!/usr/bin/env bash
# Configures the one instrumented tree the sanitizer level (tests/sanitizer/run.sh) and the fuzz
# level (tests/fuzz/run.sh) share: clang with AddressSanitizer, UndefinedBehaviorSanitizer and
# libFuzzer's coverage on every library (-fsanitize=fuzzer-no-link), so the libraries are
# compiled once for both. The unit tests link them without libFuzzer (the sanitizer runtime
# holds the coverage hooks). Warnings are the GCC build's business (-Werror there).
# Usage: tests/sanitizer/configure.sh HOST_BUILD_DIR   prints the tree's folder
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
host=$(cd "${1:?usage: configure.sh HOST_BUILD_DIR}" && pwd)
tree=$host/instrumented
clang=$(command -v clang++-14 || command -v clang++ || true)
[[ -n $clang ]] || { echo "sanitizer: clang++ not found (contrib/install-deps.sh installs clang-14)" >&2; exit 1; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$SRC" -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DCMAKE_CXX_COMPILER="$clang" -DCOMPOSER_FUZZ=ON \
  -DCOMPOSER_SANITIZE=address,undefined,fuzzer-no-link -DCOMPOSER_WERROR=OFF \
  -DCOMPOSER_BUILD_TESTS=ON "${launcher[@]}" >&2
echo "$tree"
