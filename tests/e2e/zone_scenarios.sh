#!/usr/bin/env bash
# A zone runs dry while another has GPUs, end to end on the throw-away cluster of cluster.sh:
# two nodes, each reaching a zone of its own (E2E_NODES=2 E2E_ZONES=2: cn1 reaches z1, cn2
# reaches z2, four GPUs in each).
#   - four filler jobs pinned to cn1 (-w cn1) take every GPU of z1 and hold it for
#     ZONE_FILL_S (default 90) seconds;
#   - then ZONE_JOBS (default 4) one-GPU jobs are submitted without a node: only cn2 can serve
#     them. Slurm packs jobs onto the lowest node, so without zones in the scheduler they start
#     on cn1, its PrologSlurmctld waits for a free GPU in z1 (free_wait) and fails, and Slurm
#     requeues them, over and over until the fillers end.
# Prints per job: requeues (Restarts), the node it ran on, and the seconds from submission to
# the moment its script ran; then the totals. Passes when no job was requeued and each ran on
# cn2. Then a held job, kept off cn1 at submit, waits while z1 gets room and z2 runs dry:
# composerd (SlurmSync=yes) must move its exclusion to cn2, and released it runs on cn1, not
# requeued. With ZONE_MEASURE_ONLY=yes only the figures are printed (docs/BENCHMARKS.md
# measures the product without zones in the scheduler so).
# Usage: BUILD_DIR=<build> tests/e2e/zone_scenarios.sh. About two minutes (ZONE_FILL_S longer
# without zones in the scheduler). Exits 77 (skipped) when not root.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
if [[ $(id -u) != 0 ]]; then
  echo "zone e2e: skipped: needs root (slurmd and the job prolog run as root)" >&2
  exit 77
fi
BUILD_DIR=$(cd "${BUILD_DIR:-$SRC/build}" && pwd)
export BUILD_DIR
export E2E_DIR=${E2E_DIR:-$(mktemp -d /tmp/composer-e2e-zones.XXXXXX)}
export E2E_NODES=2 E2E_ZONES=2 E2E_GPUS=8 E2E_SLURM_SYNC=yes E2E_SUBNET=${E2E_SUBNET:-235}
export E2E_PORT=${E2E_PORT:-21830} CTLD_PORT=${CTLD_PORT:-21817} SLURMD_PORT=${SLURMD_PORT:-21818}
FILL_S=${ZONE_FILL_S:-90}
JOBS=${ZONE_JOBS:-4}
trap '"$CLUSTER" stop' EXIT
trap 'exit 143' TERM INT
"$CLUSTER" start || exit 1
eval "$("$CLUSTER" env)"
# shellcheck source=scenarios.sh
source "$HERE/scenarios.sh"  # helpers: api, job_field, wait_until, fail, ...

step() { echo "zone e2e: $*"; }
OUT=$E2E_DIR/out
mkdir -p "$OUT"

failed=0
fillers=()
for ((i = 0; i < 4; i++)); do
  fillers+=("$(sbatch --parsable -w cn1 -o /dev/null --compose-gpus=1 --wrap "sleep $FILL_S")") ||
    { fail "sbatch refused a filler"; exit 1; }
done
for j in "${fillers[@]}"; do
  wait_until 60 has_devices "$j" cn1 ||
    { fail "filler $j did not get its GPU: $(job_state "$j") $(job_field "$j" Reason)"; exit 1; }
done
step "z1 empty: fillers ${fillers[*]} hold its 4 GPUs on cn1 for ${FILL_S} s"
# The snapshot job_submit reads is republished every ReconcileInterval (5 s here).
# ZONE_SETTLE_S=0 submits at once, before it shows z1 dry: composerd must steer the jobs after
# their first start there (measured in docs/BENCHMARKS.md; the check then fails).
sleep "${ZONE_SETTLE_S:-6}"
jobs=()
# Slurm sets a requeued job's SubmitTime anew: the first submission is taken here.
submitted=$(date +%s)
for ((i = 0; i < JOBS; i++)); do
  jobs+=("$(sbatch --parsable -o "$OUT/%j.out" --compose-gpus=1 --wrap 'date +%s; sleep 5')") ||
    { fail "sbatch refused a job"; exit 1; }
done
step "submitted ${jobs[*]} (one GPU each, no node named)"
all_done() {
  local j
  for j in "${jobs[@]}"; do finished "$j" || return 1; done
}
wait_until $((FILL_S + 240)) all_done || fail "jobs not done: $(squeue -h -o '%i %T %r %N')"

total_requeues=0 total_lost=0 max_lost=0
printf 'zone e2e: %-6s %-8s %-5s %-10s %s\n' job requeues node lost_s state
for j in "${jobs[@]}"; do
  r=$(job_field "$j" Restarts) node=$(job_field "$j" NodeList) state=$(job_state "$j")
  # From submission to the moment the job's script ran (after the PrologSlurmctld that composed
  # it): StartTime is only when Slurm last allocated it.
  lost=$(($(head -1 "$OUT/$j.out") - submitted))
  printf 'zone e2e: %-6s %-8s %-5s %-10s %s\n' "$j" "$r" "$node" "$lost" "$state"
  total_requeues=$((total_requeues + r)) total_lost=$((total_lost + lost))
  ((lost > max_lost)) && max_lost=$lost
  if [[ ${ZONE_MEASURE_ONLY:-no} != yes ]]; then
    [[ $r == 0 && $node == cn2 && $state == COMPLETED ]] ||
      { fail "job $j: requeued $r times, ran on $node, $state"; failed=1; }
  fi
done
echo "zone e2e: RESULT jobs=$JOBS requeues=$total_requeues lost_s_total=$total_lost lost_s_max=$max_lost"

# A waiting job follows the zones: held while z1 is dry (kept off cn1), then z1 has room and
# z2 runs dry; composerd (SlurmSync) moves the job's exclusion to cn2 while it waits, and once
# released it runs on cn1, never requeued.
exc_is() { [[ $(job_field "$1" ExcNodeList) == "$2" ]]; }
if [[ ${ZONE_MEASURE_ONLY:-no} != yes ]]; then
  held=$(sbatch --parsable --hold -o /dev/null --compose-gpus=1 --wrap 'sleep 1') ||
    { fail "sbatch refused the held job"; exit 1; }
  # job_submit excludes cn1 when the snapshot already shows z2 with room again (the jobs above
  # just ended), composerd's next round otherwise.
  wait_until 30 exc_is "$held" cn1 ||
    { fail "job $held: ExcNodeList=$(job_field "$held" ExcNodeList), not cn1"; failed=1; }
  for j in "${fillers[@]}"; do scancel "$j"; done
  fillers=()
  for ((i = 0; i < 4; i++)); do
    fillers+=("$(sbatch --parsable -w cn2 -o /dev/null --compose-gpus=1 --wrap "sleep $FILL_S")")
  done
  for j in "${fillers[@]}"; do
    wait_until 60 has_devices "$j" cn2 || { fail "filler $j did not get its GPU on cn2"; failed=1; }
  done
  step "z2 empty, z1 free: waiting for composerd to move job $held's exclusion"
  if wait_until 30 exc_is "$held" cn2; then
    scontrol release "$held"
    wait_until 60 finished "$held" || fail "job $held: $(job_state "$held") $(job_field "$held" Reason)"
    r=$(job_field "$held" Restarts) node=$(job_field "$held" NodeList)
    step "job $held: requeues $r, ran on $node, $(job_state "$held")"
    [[ $r == 0 && $node == cn1 && $(job_state "$held") == COMPLETED ]] ||
      { fail "job $held: requeued $r times, ran on $node"; failed=1; }
  else
    fail "job $held: ExcNodeList=$(job_field "$held" ExcNodeList) after 30 s, not cn2"
    failed=1
  fi
fi
for j in "${fillers[@]}"; do scancel "$j"; done
if ((failed)); then
  echo "zone e2e: FAILED (logs in $E2E_DIR/log)" >&2
  exit 1
fi
echo "zone e2e: passed"
trap - EXIT
"$CLUSTER" stop
rm -rf "$E2E_DIR"
