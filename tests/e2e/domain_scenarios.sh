#!/usr/bin/env bash
# A failure domain fails under running jobs, end to end on the throw-away cluster of
# cluster.sh: 12 GPUs in three enclosures (E2E_GPU_DOMAINS=yes: encl-a, encl-b, encl-c), a
# policy whose training and inference classes are requeued when a device of theirs fails.
#   - two training jobs (2 GPUs each) and an inference job (1 GPU) run;
#   - blast-radius names the jobs a failure of the first training job's enclosure would hit;
#   - the fabric reports every GPU of that enclosure critical (the sim fabric's SimHealthFile);
#   - exactly the jobs blast-radius named are requeued through Slurm, once each (the ledger
#     says so with the cause), and run again on GPUs of the healthy enclosures; the others keep
#     running on the devices they had, never requeued;
#   - /metrics counts the enclosure's failed GPUs; after the reactions no live composition
#     holds a device of the failed enclosure.
# Usage: BUILD_DIR=<build> tests/e2e/domain_scenarios.sh. About three minutes.
# Exits 77 (skipped) when not root.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
if [[ $(id -u) != 0 ]]; then
  echo "domain e2e: skipped: needs root (slurmd and the job prolog run as root)" >&2
  exit 77
fi
BUILD_DIR=$(cd "${BUILD_DIR:-$SRC/build}" && pwd)
export BUILD_DIR
COMPOSERCTL=${COMPOSERCTL:-$BUILD_DIR/composer/cli/composerctl}
[[ -x $COMPOSERCTL ]] || { echo "domain e2e: composerctl not built: $COMPOSERCTL" >&2; exit 1; }
export E2E_DIR=${E2E_DIR:-$(mktemp -d /tmp/composer-e2e-domain.XXXXXX)}
export E2E_SLURM_SYNC=yes E2E_GPUS=12 E2E_GPU_MODELS=A100-80G:4,A100-80G:4,A100-80G:4
export E2E_GPU_DOMAINS=yes
trap '"$CLUSTER" stop' EXIT
trap 'exit 143' TERM INT
"$CLUSTER" start || exit 1
eval "$("$CLUSTER" env)"
# shellcheck source=scenarios.sh
source "$HERE/scenarios.sh"  # helpers: api, job_state, job_field, wait_until, fail, ...

ctl() { "$COMPOSERCTL" --server "$E2E_URL" --munge-socket "$MUNGE_SOCKET" "$@"; }
step() { echo "domain e2e: $*"; }
restarts() { job_field "$1" Restarts; }
# The enclosures of JOB's devices, sorted, space-separated (empty when it holds none).
job_enclosures() {
  api "/v1/compositions/$1/$NODE" 2>/dev/null |
    jq -r 'select(.state=="ready") | [.devices[].domains.enclosure] | unique | join(" ")'
}
# The jobs whose ledger has a reaction event, sorted, space-separated.
reacted_jobs() {
  api_all /v1/events |
    jq -r '[.events[] | select(.kind == "requeued" or .kind == "degraded" or
      .kind == "failure_ignored") | .job_id] | unique | map(tostring) | join(" ")'
}
running_again() {  # running_again JOB: requeued once, running, composed away from $FAILED
  [[ $(restarts "$1") == 1 ]] && state_is "$1" RUNNING && has_devices "$1" &&
    [[ -n $(job_enclosures "$1") && " $(job_enclosures "$1") " != *" $FAILED "* ]]
}

POLICY=$E2E_DIR/policy.conf
cat >"$POLICY" <<CONF
Class=training
Class=inference
OnFailure=training Action=requeue MaxRequeues=2
OnFailure=inference Action=requeue
CONF

failed=0
T1="" T2="" I1="" FAILED="" HIT="" SPARED="" BEFORE=""

jobs_run() {
  local out
  out=$(ctl policy apply "$POLICY" 2>&1) || fail "apply: $out" || return 1
  T1=$(sbatch --parsable -o "$OUT/%j.out" --compose-gpus=2 --workload=training --wrap 'sleep 900') &&
    T2=$(sbatch --parsable -o "$OUT/%j.out" --compose-gpus=2 --workload=training --wrap 'sleep 900') &&
    I1=$(sbatch --parsable -o "$OUT/%j.out" --compose-gpus=1 --workload=inference --wrap 'sleep 900') ||
    fail "sbatch refused a job" || return 1
  local j
  for j in "$T1" "$T2" "$I1"; do
    wait_until 90 has_devices "$j" && wait_until 30 state_is "$j" RUNNING ||
      fail "job $j did not start with its GPUs: $(job_state "$j") $(job_field "$j" Reason)" || return 1
    step "  job $j on enclosure $(job_enclosures "$j")"
  done
  BEFORE=$(for j in "$T1" "$T2" "$I1"; do echo "$j $(attached_to_job "$j")"; done)
}

blast_radius_names_the_jobs() {
  FAILED=$(job_enclosures "$T1" | cut -d' ' -f1)
  [[ -n $FAILED ]] || fail "job $T1 holds no enclosure" || return 1
  local out
  out=$(ctl blast-radius "enclosure:$FAILED" --json) || fail "blast-radius: $out" || return 1
  HIT=$(jq -r '[.compositions[].job_id] | unique | map(tostring) | join(" ")' <<<"$out")
  SPARED=""
  local j
  for j in "$T1" "$T2" "$I1"; do [[ " $HIT " == *" $j "* ]] || SPARED+="${SPARED:+ }$j"; done
  step "  a failure of enclosure:$FAILED would hit jobs $HIT; spared: ${SPARED:-none}"
  [[ " $HIT " == *" $T1 "* ]] || fail "blast-radius misses job $T1: $out" || return 1
  # Four GPUs an enclosure: the three jobs (5 GPUs) never fit in one.
  [[ -n $SPARED ]] || fail "every job is in enclosure $FAILED: $out"
}

enclosure_fails_and_the_hit_jobs_are_requeued() {
  api_all /v1/devices "type=gpu" |
    jq -r --arg e "$FAILED" '.devices[] | select(.domains.enclosure == $e) | "\(.id) critical"' \
      >"$E2E_DIR/composer/sim-health"
  [[ $(wc -l <"$E2E_DIR/composer/sim-health") == 4 ]] ||
    fail "enclosure $FAILED has not 4 GPUs: $(cat "$E2E_DIR/composer/sim-health")" || return 1
  local j
  for j in $HIT; do
    # A reconcile round (5 s) marks the GPUs and requeues; Slurm runs the job again after
    # cred_expire (30 s here).
    wait_until 180 running_again "$j" ||
      fail "job $j was not requeued and run again away from enclosure $FAILED: $(job_state "$j")" \
        "Restarts=$(restarts "$j") enclosures=$(job_enclosures "$j") events: $(event_kinds "$j")" ||
      return 1
    step "  job $j requeued, running again on enclosure $(job_enclosures "$j")"
    api /v1/events "job=$j" | jq -e --arg e "enclosure:$FAILED" \
      '[.events[] | select(.kind == "requeued")] | length == 1 and
        (.[0].detail | contains($e) and contains("requeued through Slurm (1 of at most"))' \
      >/dev/null || fail "job $j's ledger: $(api /v1/events "job=$j" | jq -c '[.events[] | {kind, detail}]')" ||
      return 1
  done
}

spared_jobs_keep_running() {
  local j
  for j in $SPARED; do
    state_is "$j" RUNNING || fail "spared job $j is $(job_state "$j")" || return 1
    [[ $(restarts "$j") == 0 ]] || fail "spared job $j was requeued" || return 1
    grep -qx "$j $(attached_to_job "$j")" <<<"$BEFORE" ||
      fail "spared job $j's devices changed: $(attached_to_job "$j"), before: $BEFORE" || return 1
  done
  [[ $(reacted_jobs) == "$(tr ' ' '\n' <<<"$HIT" | sort -n | paste -sd' ')" ]] ||
    fail "the ledger reacted for jobs '$(reacted_jobs)', blast-radius named '$HIT'" || return 1
  # Another rounds later: still one requeue each.
  sleep 6
  for j in $HIT; do [[ $(restarts "$j") == 1 ]] || fail "job $j requeued again: $(restarts "$j")" || return 1; done
}

metrics_and_blast_radius_agree() {
  local m out
  m=$(curl -fsS "$E2E_URL/metrics") || fail "no /metrics" || return 1
  grep -qx "composer_domain_failed_devices{level=\"enclosure\",domain=\"$FAILED\"} 4" <<<"$m" ||
    fail "metrics: $(grep composer_domain <<<"$m")" || return 1
  grep -qx "composer_domain_affected_jobs{level=\"enclosure\",domain=\"$FAILED\"} 0" <<<"$m" ||
    fail "metrics: $(grep composer_domain <<<"$m")" || return 1
  grep -qx "composer_failure_reactions_total{reaction=\"requeued\"} $(wc -w <<<"$HIT")" <<<"$m" ||
    fail "metrics: $(grep composer_failure <<<"$m")" || return 1
  out=$(ctl blast-radius "enclosure:$FAILED" --json) || fail "blast-radius: $out" || return 1
  jq -e '.compositions | length == 0' <<<"$out" >/dev/null ||
    fail "live compositions still hold failed GPUs: $out" || return 1
  jq -e '.devices.failed == 4' <<<"$out" >/dev/null || fail "blast-radius: $out"
}

for s in jobs_run blast_radius_names_the_jobs enclosure_fails_and_the_hit_jobs_are_requeued \
  spared_jobs_keep_running metrics_and_blast_radius_agree; do
  step "$s"
  start=$SECONDS
  if "$s"; then echo "  ok ($((SECONDS - start)) s)"; else failed=1; break; fi
done
scancel "$T1" "$T2" "$I1" 2>/dev/null
if ((failed)); then
  echo "domain e2e: FAILED (logs in $E2E_DIR/log)" >&2
  exit 1
fi
echo "domain e2e: all scenarios passed"
