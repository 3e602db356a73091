#!/usr/bin/env bash
# Builds the fuzz targets in the clang tree beside the host build that the sanitizer level
# shares (tests/sanitizer/configure.sh: every library instrumented for libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer) and runs
# each for COMPOSER_FUZZ_SECONDS (default 20) from its seed corpus (corpus/<target>/, copied:
# what the run finds stays in the tree, the repository's corpus is not changed). Any crash,
# sanitizer report, leak or broken invariant fails the run and leaves the input that
# provoked it in the tree's artifacts/ folder. Prints per target the executions and the
# findings.
# Usage: tests/fuzz/run.sh HOST_BUILD_DIR
#   a long run: COMPOSER_FUZZ_SECONDS=3600 tests/fuzz/run.sh build
#   one target: COMPOSER_FUZZ_ONLY=policy_file tests/fuzz/run.sh build
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
host=$(cd "${1:?usage: run.sh HOST_BUILD_DIR}" && pwd)
seconds=${COMPOSER_FUZZ_SECONDS:-20}

targets=(api_json composer_conf policy_file job_options credentials redfish_answers liqid_answers)
[[ -n ${COMPOSER_FUZZ_ONLY:-} ]] && read -r -a targets <<<"${COMPOSER_FUZZ_ONLY//,/ }"

tree=$("$SRC/tests/sanitizer/configure.sh" "$host")
echo "fuzz: building ${targets[*]}"
cmake --build "$tree" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$tree/artifacts"
failed=0
summary=()
for t in "${targets[@]}"; do
  work="$tree/corpus/$t"
  mkdir -p "$work"
  [[ -d $HERE/corpus/$t ]] && cp -n "$HERE/corpus/$t"/* "$work"/ 2>/dev/null || true
  log="$tree/fuzz_$t.log"
  echo "fuzz: $t for ${seconds}s"
  if "$tree/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
    -artifact_prefix="$tree/artifacts/${t}-" -print_final_stats=1 "$work" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed=1
    tail -40 "$log" >&2
  fi
  runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  summary+=("$(printf '%-16s %10s executions  %s' "$t" "${runs:-0}" "$status")")
done
echo "fuzz: target           executions  result (${seconds}s each; logs in $tree)"
printf 'fuzz: %s\n' "${summary[@]}"
exit "$failed"
