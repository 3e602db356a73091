#!/usr/bin/env bash
# Job arrays on a real local Slurm (tests/e2e/cluster.sh, one node, 8 GPUs in the pool,
# compose=controller), figures printed, never asserted:
#   start   (default) an array of TASKS (200) tasks of 1 s, 1 GPU each, composed, against the
#           same array without composing throttled to the pool's width (%8), ROUNDS (3) pairs
#           side by side in one run, the order alternating; then where the last composed
#           array's and the last plain one's time went, phase by phase, from slurmctld's log
#           composerd's and slurmd's (array_phases.py): the allocation to the composition and
#           to PrologSlurmctld's end, the run, the job's end to the node epilog's busy check,
#           the busy check and the release call, the job's end to its release, and the time
#           from a task's end to the allocation of the task that takes its place.
#   outage  an array of TASKS (300) tasks of 1 s, 1 GPU each, on a fabric of 2 s per
#           attach; composerd killed after OUTAGE_AT (20) s and started again 10 s later;
#           prints how many tasks were requeued, how many completed, and what stayed attached.
#           E2E_OUTAGE_WAIT (here 60, the plugin's default) is the plugstack's outage_wait=;
#           0 is how composer-slurmctld and the node prolog behaved before it existed.
# Usage: tests/bench/array_bench.sh [start [TASKS [ROUNDS]] | outage [TASKS]]
# Needs a build (BUILD_DIR, default build) and root; the cluster's folder and ports from
# E2E_DIR, E2E_PORT, CTLD_PORT and SLURMD_PORT, other plugins from PLUGIN_DIR and
# COMPOSER_SLURMCTLD (cluster.sh). Results: docs/BENCHMARKS.md, "Short composed jobs".
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mode=${1:-start}
[[ $mode == start || $mode == outage ]] ||
  { echo "array_bench: unknown mode '$mode': allowed are start and outage" >&2; exit 2; }
shift || true
if [[ $mode == start ]]; then
  tasks=${1:-200} rounds=${2:-3}
else
  tasks=${1:-300} rounds=1
fi
[[ $tasks =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ ]] ||
  { echo "array_bench: TASKS and ROUNDS are whole numbers above 0" >&2; exit 2; }
export BUILD_DIR=${BUILD_DIR:-$root/build} E2E_DIR=${E2E_DIR:-/tmp/composer-e2e-arraybench}
export E2E_PORT=${E2E_PORT:-16960} CTLD_PORT=${CTLD_PORT:-16967} SLURMD_PORT=${SLURMD_PORT:-16968}
export E2E_GPUS=8 E2E_COMPOSE=controller E2E_OUTAGE_WAIT=${E2E_OUTAGE_WAIT:-60}
cluster=$root/tests/e2e/cluster.sh
trap '"$cluster" stop' EXIT
"$cluster" start >/dev/null
eval "$("$cluster" env)"
width=$E2E_GPUS
ctld_log=$E2E_DIR/log/composer-slurmctld.log
# shellcheck source-path=SCRIPTDIR source=../e2e/scenarios.sh
source "$root/tests/e2e/scenarios.sh"  # attached

now() { date +%s.%N; }
# run_array ARGS...: submits the array, waits until no task is left; prints "SECONDS JOBID".
run_array() {
  local t0 id
  t0=$(now)
  id=$(sbatch --parsable -o /dev/null "$@") || return 1
  while [[ -n $(squeue -h -j "$id" -o %i 2>/dev/null) ]]; do sleep 0.1; done
  echo "$(echo "$(now) - $t0" | bc -l) $id"
}

if [[ $mode == outage ]]; then
  sed -i 's/^SimLatency=.*/SimLatency=2000/' "$E2E_DIR/etc/composer.conf"
  "$cluster" stop-composerd
  "$cluster" start-composerd
  t0=$(now)
  id=$(sbatch --parsable -o /dev/null --array="0-$((tasks - 1))" --compose-gpus=1 --wrap 'sleep 1')
  sleep "${OUTAGE_AT:-20}"
  kill -KILL "$(cat "$E2E_DIR/run/composerd.pid")"
  down=$(now)
  sleep 10
  "$cluster" start-composerd
  echo "composerd down for $(printf '%.1f' "$(echo "$(now) - $down" | bc -l)") s, from $(printf '%.0f' "$(echo "$down - $t0" | bc -l)") s after the submission"
  while [[ -n $(squeue -h -j "$id" -o %i 2>/dev/null) ]]; do sleep 1; done
  secs=$(echo "$(now) - $t0" | bc -l)
  restarts=$(scontrol -o show job "$id" | grep -o 'Restarts=[0-9]*' | awk -F= '$2 > 0 {n++} END {print n + 0}')
  completed=$(scontrol -o show job "$id" | grep -c 'JobState=COMPLETED' || true)
  sleep 5  # the last epilogs' releases
  attached=$(attached)
  printf '%d-task array, 1 GPU each, 2 s per attach, composerd killed and started 10 s later:\n' "$tasks"
  printf '  tasks requeued (Restarts > 0): %d\n  tasks completed: %d of %d\n  the array took %.1f s\n' \
    "$restarts" "$completed" "$tasks" "$secs"
  printf '  composerd back after a wait (composer-slurmctld, node prologs and epilogs): %d\n' \
    "$(cat "$ctld_log" "$E2E_DIR/log/slurmd.log" | grep -c 'composerd answered again after' || true)"
  printf '  nodes drained: %d\n' "$(sinfo -h -N -t drain,draining -o %N | sort -u | wc -l)"
  printf '  devices attached afterwards: %s\n' "$attached"
  exit 0
fi

plain_all=() composed_all=()
for ((r = 0; r < rounds; r++)); do
  for kind in $( ((r % 2)) && echo "composed plain" || echo "plain composed"); do
    if [[ $kind == plain ]]; then
      read -r secs id < <(run_array --array="0-$((tasks - 1))%$width" --wrap 'sleep 1')
      plain_all+=("$secs")
      plain_id=$id
    else
      read -r secs id < <(run_array --array="0-$((tasks - 1))" --compose-gpus=1 --wrap 'sleep 1')
      composed_all+=("$secs")
      composed_id=$id
    fi
    printf 'round %d: %-8s %6.1f s (job %s)\n' "$((r + 1))" "$kind" "$secs" "$id"
  done
done
printf '%d-task array of 1 s tasks, 1 GPU each, %d GPUs in the pool (%d rounds):\n' "$tasks" "$width" "$rounds"
for ((r = 0; r < rounds; r++)); do
  printf '  round %d: plain %%%d %.1f s, composed %.1f s, ratio %.2fx\n' "$((r + 1))" "$width" \
    "${plain_all[r]}" "${composed_all[r]}" "$(echo "${composed_all[r]} / ${plain_all[r]}" | bc -l)"
done

printf '  waits for devices still being released (composer-slurmctld): %d\n' \
  "$(grep -c 'asking again for up to' "$ctld_log" || true)"
# Where the last rounds' time went.
python3 "$root/tests/bench/array_phases.py" --job "$composed_id" --width "$width" \
  --slurmctld "$E2E_DIR/log/slurmctld.log" --composerd "$E2E_DIR/log/composerd.log" \
  --slurmd "$E2E_DIR/log/slurmd.log"
python3 "$root/tests/bench/array_phases.py" --job "$plain_id" --width "$width" \
  --slurmctld "$E2E_DIR/log/slurmctld.log"
