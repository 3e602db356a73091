#!/usr/bin/env bash
# Time-of-day policies end to end on the throw-away cluster of cluster.sh (E2E_SLURM_SYNC=yes):
# composerctl sends a policy to composerd, which compiles it into hold and blocker reservations
# on Slurm's cap licenses and keeps them in step; Slurm itself enforces it.
#
# The policy has one window, "low", a minute long and two to three minutes ahead of now, in
# which training may hold 1 GPU; the rest of the time (Default) it may hold 4. The scenario:
#   - applying shows the plan, holds the cap license at 4 and creates the blocker;
#   - job_submit adds the cap license, refuses more than a class may ever hold and refuses
#     the blocker as --reservation;
#   - three 2-GPU training jobs: exactly two run (the cap is 4), the third pends on licenses;
#   - a 2-GPU job whose 4-minute limit would reach into "low" waits and starts within seconds
#     of "low" ending;
#   - applying the same policy again changes nothing;
#   - raising the cap while that job runs (the hold and the blocker updated in place) kills
#     nothing;
#   - the pool rules Slurm: 2 of 8 GPUs drained, a job for 8 pends on Licenses and never
#     starts; resumed, it starts; the same with 2 GPUs the fabric reports failed;
#   - per-model licenses: with the 4 H100 in use a job for an H100 pends on Licenses while a
#     job for A100s runs, then runs itself, never refused at compose time;
#   - a blocker deleted by hand is back within a reconcile round.
# Usage: BUILD_DIR=<build> tests/e2e/policy_scenarios.sh. About four to five minutes.
# Exits 77 (skipped) when not root.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
if [[ $(id -u) != 0 ]]; then
  echo "policy e2e: skipped: needs root (slurmd and the job prolog run as root)" >&2
  exit 77
fi
BUILD_DIR=$(cd "${BUILD_DIR:-$SRC/build}" && pwd)
export BUILD_DIR
COMPOSERCTL=${COMPOSERCTL:-$BUILD_DIR/composer/cli/composerctl}
[[ -x $COMPOSERCTL ]] || { echo "policy e2e: composerctl not built: $COMPOSERCTL" >&2; exit 1; }
export E2E_DIR=${E2E_DIR:-$(mktemp -d /tmp/composer-e2e-policy.XXXXXX)}
export E2E_SLURM_SYNC=yes
# Two GPU models, each with its own license beside fabric_gpu.
export E2E_GPU_MODELS=A100-80G:4,H100:4
trap '"$CLUSTER" stop' EXIT
trap 'exit 143' TERM INT
"$CLUSTER" start || exit 1
eval "$("$CLUSTER" env)"
# shellcheck source=scenarios.sh
source "$HERE/scenarios.sh"  # helpers: api, job_state, job_field, wait_until, fail, ...
# shellcheck source=pool_scenarios.sh
source "$HERE/pool_scenarios.sh"  # the pool rules Slurm: drained, failed, a model exhausted

ctl() { "$COMPOSERCTL" --server "$E2E_URL" --munge-socket "$MUNGE_SOCKET" "$@"; }
hhmm() { date -u -d "@$1" +%H:%M; }
running_jobs() { squeue -h -t RUNNING -o %i | wc -l; }
attached_gpus() { api_all /v1/devices "state=attached&type=gpu" | jq '.devices | length'; }
gpus_attached_are() { [[ $(attached_gpus) == "$1" ]]; }
# What Slurm may hand out of a license: its total less composerd's hold reservation.
license_total() {
  local total held
  total=$(scontrol -o show licenses "$1" | grep -o 'Total=[0-9]*' | cut -d= -f2)
  held=$(scontrol -o show reservation "hold_$1" 2>/dev/null | grep -o "Licenses=$1:[0-9]*" | cut -d: -f2)
  echo $((total - ${held:-0}))
}
reservation_line() { scontrol -o show reservation "$1" 2>/dev/null | sed 's/ State=[A-Z]*//'; }
train_job() {  # train_job TIME_LIMIT SLEEP: a 2-GPU training job; prints its id
  sbatch --parsable -o "$OUT/%j.out" -t "$1" --compose-gpus=2 --workload=training \
    --wrap "sleep $2"
}

# Windows on whole minutes: "low" opens 2 to 3 minutes from now and lasts one minute.
now=$(date +%s)
LOW_START=$(((now / 60 + 3) * 60))
LOW_END=$((LOW_START + 60))
POLICY=$E2E_DIR/policy.conf
write_policy() {  # write_policy DEFAULT_CAP
  cat >"$POLICY" <<CONF
TimeZone=UTC
Window=low Start=$(hhmm "$LOW_START") End=$(hhmm "$LOW_END")
Class=training
Class=inference
Limit=training Window=Default Gpus=$1
Limit=training Window=low Gpus=1
CONF
}
write_policy 4
echo "policy e2e: window low $(hhmm "$LOW_START")-$(hhmm "$LOW_END") UTC, now $(date -u +%H:%M:%S)"

step() { echo "policy e2e: $*"; }
failed=0

apply_policy() {
  local out
  out=$(ctl policy apply --dry-run "$POLICY" 2>&1) || fail "dry run failed: $out" || return 1
  grep -q "create  *low_block_training" <<<"$out" || fail "dry run shows no blocker: $out" || return 1
  [[ -z $(scontrol -o show reservation 2>/dev/null | grep low_block) ]] ||
    fail "the dry run created a reservation" || return 1
  grep -q "create  *hold_training_gpu_cap  hold back 4 of training_gpu_cap" <<<"$out" ||
    fail "dry run shows no hold: $out" || return 1
  out=$(ctl policy apply "$POLICY" 2>&1) || fail "apply: $out" || return 1
  echo "$out" | sed 's/^/    /'
  [[ $(license_total training_gpu_cap) == 4 ]] ||
    fail "training_gpu_cap: $(scontrol -o show licenses)" || return 1
  reservation_line low_block_training | grep -q "Licenses=training_gpu_cap:3" ||
    fail "blocker: $(scontrol -o show reservation)" || return 1
  wait_until 10 grep -q training_gpu_cap "$E2E_DIR/composer/snapshot.json" ||
    fail "snapshot has no cap license: $(cat "$E2E_DIR/composer/snapshot.json")"
}

submit_refusals() {
  local err
  err=$(sbatch --hold -t 1 --compose-gpus=5 --workload=training --wrap true 2>&1) &&
    { fail "a 5-GPU training job was accepted"; return 1; }
  grep -q "may never hold more than 4 GPUs" <<<"$err" || fail "sentence: $err" || return 1
  err=$(sbatch --hold -t 1 --reservation=low_block_training --compose-gpus=1 --workload=training \
    --wrap true 2>&1) && { fail "a job was accepted into the blocker"; return 1; }
  grep -q "no job may run in it" <<<"$err" || fail "sentence: $err"
}

caps_hold_exactly() {
  J1=$(train_job 1 12) && J2=$(train_job 1 12) && J3=$(train_job 1 12) || return 1
  wait_until 30 state_is "$J1" RUNNING && wait_until 30 state_is "$J2" RUNNING ||
    fail "jobs $J1 $J2 did not start: $(squeue)" || return 1
  [[ $(job_field "$J1" Licenses) == "fabric_gpu:2,training_gpu_cap:2" ]] ||
    fail "licenses of $J1: $(job_field "$J1" Licenses)" || return 1
  sleep 3
  [[ $(job_state "$J3") == PENDING && $(job_field "$J3" Reason) == Licenses ]] ||
    fail "job $J3 is $(job_state "$J3") ($(job_field "$J3" Reason)), expected pending on Licenses" ||
    return 1
  wait_until 10 gpus_attached_are 4 || fail "$(attached_gpus) GPUs attached, expected 4" ||
    return 1
  api "/v1/compositions/$J1/$NODE" | jq -e '.workload == "training" and .window == "Default"' \
    >/dev/null || fail "ledger of $J1: $(api "/v1/compositions/$J1/$NODE")" || return 1
  wait_until 40 state_is "$J3" RUNNING || fail "job $J3 never started: $(squeue)"
}

long_job_waits_for_the_window() {
  J4=$(train_job 4 40) || return 1
  sleep 5
  [[ $(job_state "$J4") == PENDING ]] ||
    fail "job $J4 with a 4-minute limit is $(job_state "$J4") although 'low' opens at $(hhmm "$LOW_START")" ||
    return 1
  local left=$((LOW_END - $(date +%s)))
  step "job $J4 pends ($(job_field "$J4" Reason)); 'low' ends in ${left}s"
  wait_until $((left + 30)) state_is "$J4" RUNNING || fail "job $J4 never started: $(squeue)" ||
    return 1
  local started late
  started=$(date -u -d "$(job_field "$J4" StartTime)" +%s)
  late=$((started - LOW_END))
  step "job $J4 started ${late}s after 'low' ended"
  ((late >= 0 && late <= 15)) || fail "job $J4 started ${late}s after the window changed"
}

same_policy_changes_nothing() {
  local before after out
  before=$(reservation_line low_block_training; scontrol -o show licenses)
  out=$(ctl policy apply "$POLICY" 2>&1) || fail "apply: $out" || return 1
  grep -q "Changes to Slurm: none." <<<"$out" || fail "second apply: $out" || return 1
  grep -q "composerd already has this policy (version 1)" <<<"$out" || fail "second apply: $out" ||
    return 1
  after=$(reservation_line low_block_training; scontrol -o show licenses)
  [[ $before == "$after" ]] || fail "Slurm changed: $before -> $after"
}

policy_change_kills_nothing() {
  state_is "$J4" RUNNING || fail "job $J4 is not running" || return 1
  write_policy 6
  local out
  out=$(ctl policy apply "$POLICY" 2>&1) || fail "apply: $out" || return 1
  echo "$out" | sed 's/^/    /'
  grep -q "update  *low_block_training" <<<"$out" || fail "blocker not updated in place: $out" ||
    return 1
  grep -q "update  *hold_training_gpu_cap" <<<"$out" || fail "hold not updated in place: $out" ||
    return 1
  [[ $(license_total training_gpu_cap) == 6 ]] || fail "cap license: $(scontrol -o show lic)" ||
    return 1
  reservation_line low_block_training | grep -q "Licenses=training_gpu_cap:5" ||
    fail "blocker: $(reservation_line low_block_training)" || return 1
  [[ $(ctl policy history -P --noheader | wc -l) == 2 ]] || fail "history: $(ctl policy history)" ||
    return 1
  wait_until 60 finished "$J4" || fail "job $J4 did not finish" || return 1
  [[ $(job_state "$J4") == COMPLETED ]] || fail "job $J4 ended $(job_state "$J4")"
}

deleted_blocker_comes_back() {
  scontrol delete ReservationName=low_block_training || fail "cannot delete the blocker" || return 1
  # One reconcile interval (5 s) and a little.
  wait_until 8 bash -c "scontrol -o show reservation low_block_training >/dev/null 2>&1" ||
    fail "the blocker is not back: $(scontrol -o show reservation)" || return 1
  grep -q "deleted outside composerd" "$E2E_DIR/log/composerd.log" ||
    fail "no log line about the deleted blocker"
}

for s in apply_policy submit_refusals caps_hold_exactly long_job_waits_for_the_window \
  same_policy_changes_nothing policy_change_kills_nothing drained_gpus_hold_jobs_on_licenses \
  failed_gpus_hold_jobs_on_licenses exhausted_model_waits_while_another_runs \
  deleted_blocker_comes_back; do
  step "$s"
  start=$SECONDS
  if "$s"; then echo "  ok ($((SECONDS - start)) s)"; else failed=1; break; fi
done
if ((failed)); then
  echo "policy e2e: FAILED (logs in $E2E_DIR/log)" >&2
  exit 1
fi
echo "policy e2e: all scenarios passed"
