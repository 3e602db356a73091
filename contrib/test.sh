#!/usr/bin/env bash
# Sets up everything the tests need, builds, checks formatting and runs every test level:
#   unit, integration (real composerd on loopback), ha (two composerd on a PostgreSQL under
#   Patroni whose primary is killed, tests/ha; with --full also the active composerd killed and
#   frozen) and e2e (throw-away Slurm clusters, every suite side by side on ports of its own)
#   on this machine's Slurm; the release matrix (tests/releases): for Debian trixie (Slurm
#   24.11) and sid (26.05) the packages built with the release's compiler and Slurm, installed
#   into a clean chroot, and the one-node e2e suite run from the installed files; the sanitizer level, the unit tests again in a clang build
#   with AddressSanitizer and UndefinedBehaviorSanitizer; the fuzz level, every fuzz target
#   (tests/fuzz) 20 seconds from its seed corpus, in that same instrumented tree; and the lint
#   level (clang-tidy, the architecture's arrows against the CMake links).
# Usage: contrib/test.sh [--full] [ctest arguments...]   e.g. contrib/test.sh -L unit
#   --full  also, in each release, the package build with the unit level inside, the
#           integration level and every e2e suite from the build tree; this machine's release
#           (bookworm, 22.05) packages built and installed the same way; the kill -9 campaign
#           at 40 rounds of 64 clients instead of 4 of 12; the HA suite's three faults (the
#           PostgreSQL primary killed, the active composerd killed, frozen) in 20 rounds each
#           instead of the first in one (tests/ha); the integration level in the
#           sanitizer build too; and each fuzz target for ten minutes (long)
# Environment: COMPOSER_RELEASES=off skips the release matrix (it needs Debian's archive the
# first time; its chroots are cached in /var/cache/slurm-composer/chroots).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}

if [[ ${1:-} == --full ]]; then
  export COMPOSER_RELEASE_FULL=1
  # The kill -9 campaign (tests/integration/composerd_crash_test.cc) at full length.
  export COMPOSER_CRASH_ROUNDS=${COMPOSER_CRASH_ROUNDS:-40} COMPOSER_CRASH_CLIENTS=${COMPOSER_CRASH_CLIENTS:-64}
  # Every HA fault (the PostgreSQL primary's host killed, the active composerd killed, the
  # active composerd frozen), 20 rounds each under clients (tests/ha), not the first once.
  export COMPOSER_HA_FAULTS=${COMPOSER_HA_FAULTS:-all} COMPOSER_HA_ROUNDS=${COMPOSER_HA_ROUNDS:-20}
  # The integration level in the sanitizer build too, and each fuzz target ten minutes.
  export COMPOSER_SANITIZER_LEVELS=${COMPOSER_SANITIZER_LEVELS:-unit,integration}
  export COMPOSER_FUZZ_SECONDS=${COMPOSER_FUZZ_SECONDS:-600}
  shift
fi
releases=ON
[[ ${COMPOSER_RELEASES:-on} == off ]] && releases=OFF

"$root/contrib/install-deps.sh"

# The release matrix's chroots are fetched, all at once, while this machine's build and the
# first tests run (network and disk, little CPU); each release test waits for its own chroots
# (tests/releases/chroot.sh makes each one once, whoever asks first).
prefetch_pids=()
if [[ $releases == ON ]]; then
  mkdir -p "$build/releases"
  for suite in trixie sid bookworm; do
    [[ $suite == bookworm && ${COMPOSER_RELEASE_FULL:-0} != 1 ]] && continue
    for kind in build run; do
      "$root/tests/releases/chroot.sh" create "$suite" "$kind" \
        >"$build/releases/prefetch-$suite-$kind.log" 2>&1 &
      prefetch_pids+=($!)
    done
  done
fi

# Line tables (-g1) are what a failing test's backtrace needs, at two thirds of -g's compile time.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOMPOSER_BUILD_TESTS=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DCOMPOSER_WERROR=ON -DCOMPOSER_RELEASE_TESTS=$releases -DCOMPOSER_SANITIZER_TESTS=ON \
  -DCOMPOSER_FUZZ_TESTS=ON \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build "$build"
cmake --build "$build" --target format-check

# Five at a time: one compiling level at a time holds the build lock (a release's package
# build, the instrumented tree) and takes both cores, clang-tidy one; beside them the e2e suites
# and the releases' installed checks, which mostly wait for Slurm, and the short tests.
rc=0
ctest --test-dir "$build" --output-on-failure --timeout 3000 -j 5 "$@" || rc=$?
# A run of some levels only (-L unit) leaves chroots half-fetched: wait, so that nothing is
# left running.
((${#prefetch_pids[@]})) && { wait "${prefetch_pids[@]}" || true; }
exit "$rc"
