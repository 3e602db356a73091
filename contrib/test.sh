#!/usr/bin/env bash
# Sets up everything the tests need, builds, checks formatting and runs every test level:
# unit, integration (real composerd on loopback) and end to end (a throw-away Slurm cluster).
# Usage: contrib/test.sh [ctest arguments...]   e.g. contrib/test.sh -L unit
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}

"$root/contrib/install-deps.sh"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOMPOSER_BUILD_TESTS=ON \
  -DCOMPOSER_CLANG_TIDY="${COMPOSER_CLANG_TIDY:-OFF}"
cmake --build "$build"
cmake --build "$build" --target format-check

ctest --test-dir "$build" --output-on-failure --timeout 900 "$@"
