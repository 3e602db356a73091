#!/usr/bin/env bash
# The unit level built with AddressSanitizer and UndefinedBehaviorSanitizer: a second build
# tree beside this one, the one the fuzz level uses too (tests/sanitizer/configure.sh), holding
# only what the unit tests run, and every unit test run in it. Any finding stops the test that
# provoked it.
# COMPOSER_SANITIZER_LEVELS=unit,integration (contrib/test.sh --full) builds the whole tree and
# runs the integration level there too: composerd, composerctl and the fake fabric services
# sanitized, started for real.
# Usage: tests/sanitizer/run.sh HOST_BUILD_DIR
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
host=$(cd "${1:?usage: run.sh HOST_BUILD_DIR}" && pwd)

levels=${COMPOSER_SANITIZER_LEVELS:-unit}
labels="^(${levels//,/|})\$"
# What the unit tests run, by target name: the programs and plugins they start, as this
# build's own test list names them.
mapfile -t targets < <(
  ctest --test-dir "$host" -L unit --show-only=json-v1 |
    jq -r --arg b "$host/" '.tests[].command[] | select(startswith($b))' |
    while read -r f; do [[ -x $f && ! -d $f ]] && basename "$f" .so; done | sort -u)
((${#targets[@]})) || { echo "sanitizer: no unit test programs found in $host" >&2; exit 1; }

tree=$("$HERE/configure.sh" "$host")
if [[ $levels == unit ]]; then
  echo "sanitizer: building ${#targets[@]} targets: ${targets[*]}"
  cmake --build "$tree" --target "${targets[@]}"
else
  echo "sanitizer: building everything for the levels $levels"
  cmake --build "$tree"
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$tree" -L "$labels" --output-on-failure --timeout 600 -j "$(nproc)"
