#!/usr/bin/env bash
# Jobs without --workload under a time-of-day policy, end to end on the throw-away cluster of
# cluster.sh: job_submit classifies them as composerd does and Slurm holds them at the cap.
#
# The policy maps partition "infer" to class inference (2 GPUs, 1 while window "low" is open:
# twelve hours starting two hours from now) and makes training the DefaultClass (uncapped).
#   - two 2-GPU jobs in partition infer without --workload: both get inference_gpu_cap, the
#     admin comment and composerd's ledger say inference; one runs, the other pends on
#     Licenses until the first ends;
#   - a 2-GPU job with no partition falls in DefaultClass training and runs beside them;
#   - a 2-GPU inference job with a 13-hour limit is refused at submit (2 GPUs are allowed for
#     at most 12 hours at a stretch); with 12 hours it is accepted.
# Usage: BUILD_DIR=<build> tests/e2e/policy_classify_scenario.sh. About one minute.
# Exits 77 (skipped) when not root.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
if [[ $(id -u) != 0 ]]; then
  echo "classify e2e: skipped: needs root (slurmd and the job prolog run as root)" >&2
  exit 77
fi
BUILD_DIR=$(cd "${BUILD_DIR:-$SRC/build}" && pwd)
export BUILD_DIR
COMPOSERCTL=${COMPOSERCTL:-$BUILD_DIR/composer/cli/composerctl}
[[ -x $COMPOSERCTL ]] || { echo "classify e2e: composerctl not built: $COMPOSERCTL" >&2; exit 1; }
export E2E_DIR=${E2E_DIR:-$(mktemp -d /tmp/composer-e2e-classify.XXXXXX)}
export E2E_SLURM_SYNC=yes
trap '"$CLUSTER" stop' EXIT
trap 'exit 143' TERM INT
"$CLUSTER" start || exit 1
eval "$("$CLUSTER" env)"
# shellcheck source=scenarios.sh
source "$HERE/scenarios.sh"  # helpers: api, job_state, job_field, wait_until, fail, ...

ctl() { "$COMPOSERCTL" --server "$E2E_URL" --munge-socket "$MUNGE_SOCKET" "$@"; }
hhmm() { date -u -d "@$1" +%H:%M; }
step() { echo "classify e2e: $*"; }
admin_comment() { scontrol -o show job "$1" | grep -o 'AdminComment=.* [A-Z][A-Za-z]*=' | head -1; }
infer_job() {  # infer_job TIME_LIMIT SLEEP [sbatch options...]: 2 GPUs in partition infer
  local limit=$1 nap=$2
  shift 2
  sbatch --parsable -o "$OUT/%j.out" -p infer -t "$limit" --compose-gpus=2 "$@" --wrap "sleep $nap"
}

now=$(date +%s)
LOW_START=$(((now / 60 + 120) * 60))
LOW_END=$((LOW_START + 12 * 3600))
POLICY=$E2E_DIR/policy.conf
cat >"$POLICY" <<CONF
TimeZone=UTC
Window=low Start=$(hhmm "$LOW_START") End=$(hhmm "$LOW_END")
Class=training
Class=inference Partitions=infer
DefaultClass=training
Limit=inference Window=Default Gpus=2
Limit=inference Window=low Gpus=1
CONF

apply_policy() {
  # The partition the policy maps: the site's slurm.conf, not composerctl's business.
  echo "PartitionName=infer Nodes=$NODE MaxTime=INFINITE State=UP" >>"$SLURM_CONF"
  scontrol reconfigure || fail "scontrol reconfigure" || return 1
  local out
  out=$(ctl policy apply "$POLICY" 2>&1) || fail "apply: $out" || return 1
  wait_until 20 scontrol -o show partition infer >/dev/null ||
    fail "partition infer missing after the apply: $(sinfo)" || return 1
  wait_until 10 jq -e '.policy_id > 0 and .default_class == "training" and
      any(.workload_classes[]; .name == "inference" and .partitions == ["infer"])' \
    "$E2E_DIR/composer/snapshot.json" >/dev/null ||
    fail "snapshot without the rules: $(cat "$E2E_DIR/composer/snapshot.json")"
}

partition_class_is_held_at_its_cap() {
  local j1 j2 j3
  j1=$(infer_job 1 15) && j2=$(infer_job 1 15) || fail "sbatch refused a job in infer" || return 1
  j3=$(sbatch --parsable -o "$OUT/%j.out" -t 1 --compose-gpus=2 --wrap "sleep 5") ||
    fail "sbatch refused a job in the default partition" || return 1
  wait_until 30 state_is "$j1" RUNNING || fail "job $j1 did not start: $(squeue)" || return 1
  for j in "$j1" "$j2"; do
    [[ $(job_field "$j" Licenses) == "fabric_gpu:2,inference_gpu_cap:2" ]] ||
      fail "licenses of $j: $(job_field "$j" Licenses)" || return 1
    admin_comment "$j" | grep -q "AdminComment=composer: gpus=2 workload=inference nodes=1" ||
      fail "admin comment of $j: $(admin_comment "$j")" || return 1
  done
  [[ $(job_field "$j3" Licenses) == "fabric_gpu:2" ]] ||
    fail "licenses of $j3 (DefaultClass training, uncapped): $(job_field "$j3" Licenses)" ||
    return 1
  admin_comment "$j3" | grep -q "AdminComment=composer: gpus=2 workload=training nodes=1" ||
    fail "admin comment of $j3: $(admin_comment "$j3")" || return 1
  wait_until 30 state_is "$j3" RUNNING || fail "job $j3 did not start beside $j1: $(squeue)" ||
    return 1
  wait_until 15 eval '[[ $(job_state "$j2") == PENDING && $(job_field "$j2" Reason) == Licenses ]]' ||
    fail "job $j2 is $(job_state "$j2") ($(job_field "$j2" Reason)), expected pending on Licenses" ||
    return 1
  # The prolog told composerd the class job_submit chose.
  wait_until 10 eval "api /v1/compositions/$j1/$NODE | jq -e '.workload == \"inference\"' >/dev/null" ||
    fail "ledger of $j1: $(api "/v1/compositions/$j1/$NODE")" || return 1
  wait_until 40 state_is "$j2" RUNNING || fail "job $j2 never started: $(squeue)" || return 1
  wait_until 30 finished "$j2" || fail "job $j2 did not finish" || return 1
  [[ $(job_state "$j1") == COMPLETED && $(job_state "$j2") == COMPLETED ]] ||
    fail "jobs ended $(job_state "$j1") and $(job_state "$j2")"
}

never_starting_job_is_refused() {
  local err id
  err=$(infer_job 13:00:00 1 --hold 2>&1) && { fail "a 13-hour 2-GPU inference job was accepted"; return 1; }
  grep -q "may hold 2 GPUs for at most 12h at a stretch" <<<"$err" || fail "sentence: $err" ||
    return 1
  id=$(infer_job 12:00:00 1 --hold) || fail "a 12-hour 2-GPU inference job was refused" || return 1
  scancel "$id"
}

failed=0
step "window low $(hhmm "$LOW_START")-$(hhmm "$LOW_END") UTC, now $(date -u +%H:%M:%S)"
for s in apply_policy partition_class_is_held_at_its_cap never_starting_job_is_refused; do
  step "$s"
  start=$SECONDS
  if "$s"; then echo "  ok ($((SECONDS - start)) s)"; else failed=1; break; fi
done
if ((failed)); then
  echo "classify e2e: FAILED (logs in $E2E_DIR/log)" >&2
  exit 1
fi
echo "classify e2e: all scenarios passed"
