#!/usr/bin/env bash
# Starts the cluster, runs the scenarios (all, or those named as arguments, e.g.
# "batch_job_sees_its_devices"), stops the cluster whatever happens.
# Usage: BUILD_DIR=<build> tests/e2e/run.sh [scenario...]. Exits 77 (skipped) when not root.
# E2E_SCENARIOS names the file of scenarios (default scenarios.sh beside this script; it sets
# ALL_SCENARIOS), E2E_DIR_TAG what the temp folder's name gets after composer-e2e (the
# multi-node suite, run_multinode.sh, sets both). E2E_SKIP names scenarios (without the
# scenario_ prefix, space-separated) to leave out of the default set.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$HERE/cluster.sh
if [[ $(id -u) != 0 ]]; then
  echo "e2e: skipped: needs root (slurmd and the job prolog run as root)" >&2
  exit 77
fi
SCENARIOS=${E2E_SCENARIOS:-$HERE/scenarios.sh}
[[ -f $SCENARIOS ]] || { echo "e2e: no scenario file $SCENARIOS" >&2; exit 2; }
export E2E_DIR=${E2E_DIR:-$(mktemp -d "/tmp/composer-e2e${E2E_DIR_TAG:-}.XXXXXX")}
trap '"$CLUSTER" stop' EXIT
trap 'exit 143' TERM INT
"$CLUSTER" start || exit 1
eval "$("$CLUSTER" env)"
# shellcheck source=scenarios.sh
source "$SCENARIOS"

selected=()
for s in "${ALL_SCENARIOS[@]}"; do
  [[ " ${E2E_SKIP:-} " == *" ${s#scenario_} "* ]] || selected+=("$s")
done
if (($#)); then selected=("${@/#/scenario_}"); fi
failed=()
for s in "${selected[@]}"; do
  echo "e2e: ${s#scenario_}"
  start=$SECONDS
  reconciled=$(reconciler_releases)
  if ! "$s"; then
    failed+=("${s#scenario_}")
  elif [[ $(reconciler_releases) != "$reconciled" && " ${RECONCILER_MAY_RELEASE[*]:-} " != *" $s "* ]]; then
    # The epilogs release what ended jobs held; composerd's reconciler (SlurmJobCheck) would
    # hide a release that failed within the scenarios' waits.
    fail "composerd's reconciler released what the epilogs should have: $(grep -F "reconciler released" "$E2E_DIR/log/composerd.log" | tail -3)"
    failed+=("${s#scenario_}")
  else
    echo "  ok ($((SECONDS - start)) s)"
  fi
done
if ((${#failed[@]})); then
  echo "e2e: FAILED: ${failed[*]} (logs in $E2E_DIR/log)" >&2
  exit 1
fi
echo "e2e: all ${#selected[@]} scenarios passed"
trap - EXIT
"$CLUSTER" stop
rm -rf "$E2E_DIR"
