#!/usr/bin/env bash
# The pool rules Slurm through slurmdbd's remote licenses (composer.conf's SlurmLicenses=remote)
# on the throw-away cluster of cluster.sh, with slurmdbd on a MariaDB of its own: composerd
# creates fabric_gpu@composer and the others in slurmdbd itself (slurm.conf has no Licenses= for
# them) and sets their counts to what the pool can serve, with no hold reservation. The
# scenarios of pool_scenarios.sh (drained GPUs, failed GPUs, an exhausted GPU model) must hold
# exactly as with slurm.conf's licenses.
# Usage: BUILD_DIR=<build> tests/e2e/remote_license_scenarios.sh. About three minutes.
# Exits 77 (skipped) when not root.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
if [[ $(id -u) != 0 ]]; then
  echo "remote licenses e2e: skipped: needs root (slurmd and the job prolog run as root)" >&2
  exit 77
fi
BUILD_DIR=$(cd "${BUILD_DIR:-$SRC/build}" && pwd)
export BUILD_DIR
COMPOSERCTL=${COMPOSERCTL:-$BUILD_DIR/composer/cli/composerctl}
[[ -x $COMPOSERCTL ]] || { echo "remote licenses e2e: composerctl not built: $COMPOSERCTL" >&2; exit 1; }
export E2E_DIR=${E2E_DIR:-$(mktemp -d /tmp/composer-e2e-remote.XXXXXX)}
export E2E_SLURM_SYNC=yes E2E_ACCOUNTING=yes E2E_SLURM_LICENSES=remote
export E2E_GPU_MODELS=A100-80G:4,H100:4
# slurmdbd and MariaDB on ports of their own (the multi-node suites use 26819/26820).
export E2E_DBD_PORT=${E2E_DBD_PORT:-25819} E2E_DB_PORT=${E2E_DB_PORT:-25820}
trap '"$CLUSTER" stop' EXIT
trap 'exit 143' TERM INT
"$CLUSTER" start || exit 1
eval "$("$CLUSTER" env)"
# shellcheck source=scenarios.sh
source "$HERE/scenarios.sh"  # helpers: api, job_state, job_field, wait_until, fail, ...
# shellcheck source=pool_scenarios.sh
source "$HERE/pool_scenarios.sh"
ctl() { "$COMPOSERCTL" --server "$E2E_URL" --munge-socket "$MUNGE_SOCKET" "$@"; }

step() { echo "remote licenses e2e: $*"; }
failed=0

# composerd makes them in slurmdbd; slurmctld takes them from there, Remote=yes.
licenses_come_from_slurmdbd() {
  local name
  for name in fabric_gpu:8 fabric_gpu_a100-80g:4 fabric_gpu_h100:4 fabric_nvme:4; do
    wait_until 20 pool_license_is "${name%:*}" "${name#*:}" ||
      fail "no remote license ${name%:*}@composer with ${name#*:}: $(scontrol -o show licenses)" ||
      return 1
  done
  scontrol -o show licenses fabric_gpu@composer | grep -q "Remote=yes" ||
    fail "fabric_gpu@composer is not remote: $(scontrol -o show licenses)" || return 1
  sacctmgr -P -n show resource withclusters format=name,server,count,cluster |
    grep -q "^fabric_gpu|composer|8|composer-e2e$" ||
    fail "slurmdbd: $(sacctmgr -P -n show resource withclusters)" || return 1
  wait_until 10 grep -q '"license_server" : "composer"' "$E2E_DIR/composer/snapshot.json" ||
    fail "the snapshot names no license server" || return 1
  ctl slurm-config | grep -q "^SchedulerParameters=bf_licenses,allow_zero_lic$" ||
    fail "slurm-config: $(ctl slurm-config)"
}

no_reservation_and_nothing_deleted() {
  ! scontrol -o show reservation 2>/dev/null | grep -q 'ReservationName=hold_' ||
    fail "a hold reservation with remote licenses: $(scontrol -o show reservation)" || return 1
  ! grep -q "delete" "$E2E_DIR/log/composerd.log" ||
    fail "composerd deleted something: $(grep delete "$E2E_DIR/log/composerd.log")"
}

for s in licenses_come_from_slurmdbd drained_gpus_hold_jobs_on_licenses \
  failed_gpus_hold_jobs_on_licenses exhausted_model_waits_while_another_runs \
  no_reservation_and_nothing_deleted; do
  step "$s"
  start=$SECONDS
  if "$s"; then echo "  ok ($((SECONDS - start)) s)"; else failed=1; break; fi
done
if ((failed)); then
  echo "remote licenses e2e: FAILED (logs in $E2E_DIR/log)" >&2
  exit 1
fi
echo "remote licenses e2e: all scenarios passed"
