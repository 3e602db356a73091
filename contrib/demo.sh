#!/usr/bin/env bash
# The demo: installs what it needs, builds, starts a throw-away Slurm cluster on this machine
# (three compute nodes, each slurmd in a network namespace of its own, slurmdbd on a MariaDB of
# its own) with composerd on the simulated fabric, and runs the story: a 2-node training job
# and an inference job ask for composed GPUs and CXL memory, Slurm queues them against the
# pool's licenses, PrologSlurmctld composes all of a job's nodes at once, the jobs see their
# devices, EpilogSlurmctld releases, and the ledger and sacct show it all. Then a time-of-day
# policy: applied with --dry-run and for real, a training job held by its class cap until the
# night window opens, the utilisation report and its SVG, the pool in /metrics; and an offline
# capacity-planning comparison. About four minutes. Everything it starts is stopped by PID on
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
# composerd keeps Slurm in step with the pool and the policy (cap licenses, reservations).
export E2E_SLURM_SYNC=yes
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

# A policy whose night window opens at the next whole minute at least 45 s away and lasts an
# hour: by day training may hold 2 GPUs, at night 8.
now=$(date +%s)
opens=$(((now + 45 + 59) / 60 * 60))
hhmm() { date -u -d "@$1" +%H:%M; }
policy=$E2E_DIR/policy.conf
cat >"$policy" <<POLICY
TimeZone=UTC
Window=night Start=$(hhmm "$opens") End=$(hhmm $((opens + 3600)))
Class=training
Class=inference
Limit=training Window=Default Gpus=2
Limit=training Window=night Gpus=8
POLICY
say "A time-of-day policy ($policy): training holds 2 GPUs by day, 8 at night from $(hhmm "$opens") UTC"
cat "$policy"
say "composerctl policy apply --dry-run: what composerd would change in Slurm, changing nothing"
ctl policy apply --dry-run "$policy"
say "composerctl policy apply: composerd keeps the cap license's hold reservation"
ctl policy apply "$policy"
# job_submit reads the class caps from the snapshot composerd publishes.
for _ in $(seq 50); do
  grep -q training_gpu_cap "$E2E_DIR/composer/snapshot.json" && break
  sleep 0.2
done
scontrol show license training_gpu_cap | grep -E 'LicenseName|Total' || true
scontrol show reservation hold_training_gpu_cap | grep -E 'ReservationName|Licenses' || true

# shellcheck disable=SC2016  # the job's shell expands them
night=$(sbatch --parsable -J night -t 2 -o "$jobdir/%x-%j.out" --compose-gpus=4 \
  --workload=training --wrap 'echo "job $SLURM_JOB_ID started $(date -u +%T) with COMPOSER_GPUS=$COMPOSER_GPUS"')
sleep 3
say "A 4-GPU training job ($night) waits: the class may hold 2 GPUs until the night window opens"
squeue -j "$night" -o '%.6i %.8j %.8T %.20R %S'
say "composerctl explain $night: which license holds it, and why"
ctl explain "$night" || true
for _ in $(seq 300); do
  [[ $(squeue -h -j "$night" -t PD | wc -l) -eq 0 ]] && break
  sleep 0.5
done
say "The window opened at $(hhmm "$opens"):00 UTC; composerd raised the cap, Slurm started job $night"
for _ in $(seq 60); do
  [[ -z $(squeue -h -j "$night") ]] && break
  sleep 0.5
done
cat "$jobdir/night-$night.out"
scontrol show reservation hold_training_gpu_cap | grep -E 'ReservationName|Licenses' || true

say "composerctl report: utilisation since this morning, charts in $E2E_DIR/report.svg"
ctl report -S today -E now --svg "$E2E_DIR/report.svg"
say "The pool in composerd's /metrics (what Prometheus scrapes)"
curl -s "$E2E_URL/metrics" | grep -E '^composer_devices\{' | grep -v ' 0$' || true
# Offline capacity planning (no composerd, no Slurm): the Philly trace on 64 fixed 8-GPU
# servers against the same GPUs and memory in four pooled zones (docs/CAPACITY.md).
trace=${COMPOSER_TRACES:-$root/contrib/simulate/traces}/philly_subset_training.csv
if [[ -f $trace ]]; then
  say "composerctl simulate compare: the Philly trace, fixed servers against composable pools"
  "$build/composer/cli/composerctl" simulate compare --trace "$trace" \
    "$root/contrib/simulate/fixed.conf" "$root/contrib/simulate/composable.conf"
else
  say "No trace at $trace (set COMPOSER_TRACES): skipping the capacity-planning comparison"
fi
say "Done. Logs: $E2E_DIR/log"
