#!/usr/bin/env bash
# Sets up everything the tests need, builds, checks formatting and runs every test level:
#   unit, integration (real composerd on loopback) and e2e (throw-away Slurm clusters) on this
#   machine's Slurm, and the release matrix (tests/releases): for Debian trixie (Slurm 24.11)
#   and sid (26.05) the package build with the unit level, the integration level, one e2e
#   suite and the packages installed into a clean chroot; the sanitizer level,
#   the unit tests again in an AddressSanitizer and UndefinedBehaviorSanitizer build; and the
#   fuzz level, every fuzz target (tests/fuzz) 20 seconds from its seed corpus.
# Usage: contrib/test.sh [--full] [ctest arguments...]   e.g. contrib/test.sh -L unit
#   --full  also every e2e suite on each release, this machine's release (bookworm, 22.05)
#           packages built and installed the same way, the kill -9 campaign at 40 rounds
#           of 64 clients instead of 4 of 12, the integration level in the sanitizer build too,
#           and each fuzz target for ten minutes (long)
# Environment: COMPOSER_RELEASES=off skips the release matrix (it needs Debian's archive the
# first time; its chroots are cached in /var/cache/slurm-composer/chroots).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}

if [[ ${1:-} == --full ]]; then
  export COMPOSER_RELEASE_FULL=1
  # The kill -9 campaign (tests/integration/composerd_crash_test.cc) at full length.
  export COMPOSER_CRASH_ROUNDS=${COMPOSER_CRASH_ROUNDS:-40} COMPOSER_CRASH_CLIENTS=${COMPOSER_CRASH_CLIENTS:-64}
  # The integration level in the sanitizer build too, and each fuzz target ten minutes.
  export COMPOSER_SANITIZER_LEVELS=${COMPOSER_SANITIZER_LEVELS:-unit,integration}
  export COMPOSER_FUZZ_SECONDS=${COMPOSER_FUZZ_SECONDS:-600}
  shift
fi
releases=ON
[[ ${COMPOSER_RELEASES:-on} == off ]] && releases=OFF

"$root/contrib/install-deps.sh"

# The release matrix's chroots are fetched while this machine's build runs (network, not CPU);
# the release tests wait for them below.
prefetch_pid=
if [[ $releases == ON ]]; then
  mkdir -p "$build/releases"
  (
    command -v mmdebstrap >/dev/null ||
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
    for suite in trixie sid bookworm; do
      for kind in build run; do
        [[ $suite == bookworm && ${COMPOSER_RELEASE_FULL:-0} != 1 ]] && continue
        "$root/tests/releases/chroot.sh" create "$suite" "$kind" >/dev/null || true
      done
    done
  ) >"$build/releases/prefetch.log" 2>&1 &
  prefetch_pid=$!
fi

# Line tables (-g1) are what a failing test's backtrace needs, at two thirds of -g's compile time.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOMPOSER_BUILD_TESTS=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DCOMPOSER_WERROR=ON -DCOMPOSER_RELEASE_TESTS=$releases -DCOMPOSER_SANITIZER_TESTS=ON \
  -DCOMPOSER_FUZZ_TESTS=ON \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build "$build"
cmake --build "$build" --target format-check

if [[ -n $prefetch_pid ]]; then
  wait "$prefetch_pid" || true
  echo "test: release chroots ready (log: $build/releases/prefetch.log)"
fi
# Three at a time: the release matrix builds in its chroots while this machine's suites run;
# each kind of long test holds its own lock (tests/e2e, tests/releases).
ctest --test-dir "$build" --output-on-failure --timeout 3000 -j 3 "$@"
