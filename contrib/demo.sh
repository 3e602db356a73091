#!/usr/bin/env bash
# The demo: installs what it needs, builds, starts a throw-away Slurm cluster on this machine
# (three compute nodes, each slurmd in a network namespace of its own, slurmdbd on a MariaDB of
# its own) with composerd on the simulated fabric, and runs the story: a 2-node training job
# and an inference job ask for composed GPUs and CXL memory, Slurm queues them against the
# pool's licenses, PrologSlurmctld composes all of a job's nodes at once, the jobs see their
# devices, EpilogSlurmctld releases, and the ledger and sacct show it all. Everything it starts is stopped by PID on
# exit, even on failure (tests/e2e/cluster.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}

"$root/contrib/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja >/dev/null
cmake --build "$build" --target composerd composerctl spank_composer job_submit_composer \
  composer-slurmctld

export BUILD_DIR=$build E2E_DIR=${DEMO_DIR:-/tmp/composer-e2e-demo}
export E2E_PORT=${DEMO_PORT:-16930} CTLD_PORT=16917 SLURMD_PORT=16918
export E2E_NODES=3 E2E_ACCOUNTING=yes E2E_DBD_PORT=16919 E2E_DB_PORT=16920 E2E_SUBNET=232
export E2E_GPUS=8 E2E_MEM_BLOCKS=8 E2E_NVME=4
cluster=$root/tests/e2e/cluster.sh
trap '"$cluster" stop' EXIT
"$cluster" start
eval "$("$cluster" env)"
ctl() { "$build/composer/cli/composerctl" --server "$E2E_URL" --munge-socket "$MUNGE_SOCKET" "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
jobdir=$E2E_DIR/jobs
mkdir -p "$jobdir"

say "The pool before any job (composerctl pool)"
ctl pool

say "Submitting a 2-node training job (2 GPUs and 64G CXL memory on each node) and an inference job (2 GPUs, 64G)"
cat >"$jobdir/job.sh" <<'JOB'
#!/bin/bash
# One task per node: each prints what its node was composed.
srun -l bash -c 'echo "job $SLURM_JOB_ID ($SLURM_JOB_NAME) on $SLURMD_NODENAME:" \
  "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES COMPOSER_GPUS=$COMPOSER_GPUS" \
  "COMPOSER_MEM_NUMA=$COMPOSER_MEM_NUMA"'
sleep 12
JOB
train=$(sbatch --parsable -J train -N 2 -o "$jobdir/%x-%j.out" --compose-gpus=2 --compose-mem=64G \
  --workload=training "$jobdir/job.sh")
infer=$(sbatch --parsable -J infer -o "$jobdir/%x-%j.out" --compose-gpus=2 --compose-mem=64G \
  --workload=inference "$jobdir/job.sh")
echo "training job $train, inference job $infer"

say "Requests that can never be served as asked are refused at submit"
sbatch --compose-gpus=64 --wrap true || true
sbatch -N 1-3 --compose-gpus=1 --wrap true || true

for _ in $(seq 60); do
  [[ $(squeue -h -t R | wc -l) -ge 2 ]] && break
  sleep 0.5
done
sleep 1

say "While they run: squeue"
squeue -o '%.6i %.8j %.8T %.10M %.6D %.20R %L'
say "scontrol show job $train (licenses and the request in AdminComment)"
scontrol show job "$train" | grep -E 'JobId|Licenses|TresPerNode|AdminComment|Comment' || true
say "composerctl compositions list --live"
ctl compositions list --live
say "composerctl pool"
ctl pool

say "Waiting for both jobs to end"
for _ in $(seq 120); do
  [[ $(squeue -h | wc -l) -eq 0 ]] && break
  sleep 0.5
done
sleep 1

say "What the jobs saw"
cat "$jobdir"/train-"$train".out "$jobdir"/infer-"$infer".out

say "The pool after: everything free again"
ctl pool
say "The ledger for job $train (composerctl events --job $train)"
ctl events --job "$train"
say "Accounting: sacct -j $train,$infer (the pool's licenses are TRES: AccountingStorageTRES)"
sleep 2  # slurmctld sends the job's end to slurmdbd
sacct -j "$train,$infer" -X -o JobID,JobName,NNodes,NodeList,State,AllocTRES%100,AdminComment%60
# Offline capacity planning (no composerd, no Slurm): the Philly trace on 64 fixed 8-GPU
# servers against the same GPUs and memory in four pooled zones (docs/CAPACITY.md).
trace=${COMPOSER_TRACES:-$root/../shared/data/traces}/philly_subset_training.csv
if [[ -f $trace ]]; then
  say "composerctl simulate compare: the Philly trace, fixed servers against composable pools"
  "$build/composer/cli/composerctl" simulate compare --trace "$trace" \
    "$root/contrib/simulate/fixed.conf" "$root/contrib/simulate/composable.conf"
else
  say "No trace at $trace (set COMPOSER_TRACES): skipping the capacity-planning comparison"
fi
say "Done. Logs: $E2E_DIR/log"
