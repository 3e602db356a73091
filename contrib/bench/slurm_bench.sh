#!/usr/bin/env bash
# Benchmarks on a real local Slurm (tests/e2e/cluster.sh), figures printed, never asserted:
#  1. sbatch throughput over N submissions with and without JobSubmitPlugins=composer,
#     interleaved in rounds in one run so that both see the same machine;
#  2. the job start delay a composition adds with a zero-latency sim fabric: the time from
#     sbatch returning to the job's first line, for composed and plain jobs, side by side.
#  3. with --nodes 3: on a cluster of three nodes (each slurmd in a network namespace), the
#     start delay of composed and plain jobs on one node and on three, and how many calls to
#     composerd each composed job cost (the ledger's requests and releases per job).
# Usage: contrib/bench/slurm_bench.sh [--nodes 3] [SUBMISSIONS (500)] [START_JOBS (20)]
# Needs a build (BUILD_DIR, default build) and root. Results: docs/BENCHMARKS.md.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
nodes=1
if [[ ${1:-} == --nodes ]]; then
  nodes=$2
  shift 2
  export E2E_NODES=$nodes E2E_SUBNET=${E2E_SUBNET:-233}
fi
n=${1:-500}
starts=${2:-20}
export BUILD_DIR=${BUILD_DIR:-$root/build} E2E_DIR=${E2E_DIR:-/tmp/composer-e2e-bench}
export E2E_PORT=${E2E_PORT:-16950} CTLD_PORT=${CTLD_PORT:-16957} SLURMD_PORT=${SLURMD_PORT:-16958}
cluster=$root/tests/e2e/cluster.sh
trap '"$cluster" stop' EXIT
"$cluster" start >/dev/null
eval "$("$cluster" env)"

# Zero-latency fabric for the start-delay figure.
sed -i 's/^SimLatency=.*/SimLatency=0/' "$E2E_DIR/etc/composer.conf"
"$cluster" stop-composerd
"$cluster" start-composerd

set_plugin() {  # set_plugin on|off
  if [[ $1 == on ]]; then
    sed -i 's/^#JobSubmitPlugins=composer/JobSubmitPlugins=composer/' "$SLURM_CONF"
  else
    sed -i 's/^JobSubmitPlugins=composer/#JobSubmitPlugins=composer/' "$SLURM_CONF"
  fi
  scontrol reconfigure
  sleep 2
}

submit_round() {  # submit_round COUNT -> prints seconds
  local count=$1 t0 t1
  t0=$(date +%s.%N)
  for ((i = 0; i < count; i++)); do sbatch --hold --wrap true >/dev/null; done
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

# Start delay: one job at a time, so the figure is the path of one job, not queueing.
jobdir=$E2E_DIR/bench-jobs
mkdir -p "$jobdir"
measure() {  # measure LABEL SBATCH-ARGS... -> prints the median delay in ms
  local label=$1
  shift
  local delays=()
  for ((i = 0; i < starts; i++)); do
    local out=$jobdir/$label-$i.t t0 t1
    rm -f "$out"
    t0=$(date +%s.%N)
    sbatch -o /dev/null "$@" --wrap "date +%s.%N > $out" >/dev/null
    for ((w = 0; w < 600; w++)); do [[ -s $out ]] && break; sleep 0.02; done
    t1=$(cat "$out")
    delays+=("$(echo "($t1 - $t0) * 1000" | bc -l)")
    while [[ -n $(squeue -h) ]]; do sleep 0.05; done
  done
  printf '%s\n' "${delays[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.0f\n", a[int((NR+1)/2)]}'
}

if ((nodes > 1)); then
  printf 'job start delay (sbatch return to first line), median of %d jobs each, %d-node cluster:\n' \
    "$starts" "$nodes"
  for shape in 1 "$nodes"; do
    plain=$(measure "plain$shape" -N "$shape")
    composed=$(measure "composed$shape" -N "$shape" --compose-gpus=2)
    printf '  -N %d: plain %d ms, composed (2 GPUs per node) %d ms, added %d ms\n' \
      "$shape" "$plain" "$composed" $((composed - plain))
  done
  # Calls per composed job, from composerd's request counters: compose=node asks once from
  # every node's prolog and once from every epilog, compose=controller once per job for each.
  calls=$(curl -fsS "$E2E_URL/metrics" |
    awk -v jobs=$((2 * starts)) '/^composer_api_requests_total\{/ && /route="\/v1\/compositions\/\{job\}/ &&
      (/method="PUT"/ || /method="DELETE"/) { n += $NF } END { printf "%.1f\n", n / jobs }')
  echo "calls to composerd per composed job (compose + release, /metrics): $calls"
  exit 0
fi

rounds=10
per=$((n / rounds))
with=0
without=0
# Alternate which comes first, so neither always follows a reconfigure or a cancel storm.
for ((r = 0; r < rounds; r++)); do
  for mode in $( ((r % 2)) && echo "off on" || echo "on off"); do
    set_plugin "$mode"
    secs=$(submit_round "$per")
    if [[ $mode == on ]]; then with=$(echo "$with + $secs" | bc -l); else without=$(echo "$without + $secs" | bc -l); fi
    scancel -t PENDING
    sleep 1
  done
done
set_plugin on
rate_with=$(echo "$per * $rounds / $with" | bc -l)
rate_without=$(echo "$per * $rounds / $without" | bc -l)
printf 'sbatch throughput, %d submissions each, %d interleaved rounds:\n' $((per * rounds)) $rounds
printf '  with job_submit/composer:    %.1f submissions/s\n' "$rate_with"
printf '  without:                     %.1f submissions/s\n' "$rate_without"
printf '  ratio with/without:          %.3f\n' "$(echo "$rate_with / $rate_without" | bc -l)"

plain=$(measure plain)
composed=$(measure composed --compose-gpus=2 --compose-mem=64G)
printf 'job start delay (sbatch return to first line), median of %d jobs each:\n' "$starts"
printf '  plain job:                   %d ms\n' "$plain"
printf '  composed job (2 GPUs + 64G): %d ms\n' "$composed"
printf '  added by the composition:    %d ms\n' $((composed - plain))
