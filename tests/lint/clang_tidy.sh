#!/usr/bin/env bash
# clang_tidy.sh RUN_CLANG_TIDY CLANG_TIDY BUILD_DIR SOURCE_DIR: every product translation unit
# in BUILD_DIR/compile_commands.json through clang-tidy; fails on any finding (.clang-tidy
# makes every enabled check an error).
set -euo pipefail
run=$1 tidy=$2 build=$3 src=$4
jobs=$(( $(nproc) > 1 ? $(nproc) - 1 : 1 ))
# GCC-only warning flags (cmake/ComposerWarnings.cmake) are unknown to clang.
exec "$run" -clang-tidy-binary "$tidy" -p "$build" -quiet -j "$jobs" \
  -extra-arg=-Wno-unknown-warning-option \
  "^$src/(composer|db|policies|slurm-plugin)/"
