#!/usr/bin/env bash
# Multi-node scenarios on the cluster cluster.sh starts with E2E_NODES=3 E2E_ACCOUNTING=yes
# (run by run_multinode.sh): jobs across nodes, accounting of the pool's licenses, a node
# whose slurmd dies under a composed job, a job array spread over the nodes, a requeue, small
# memory requests held by Slurm until a whole block is free. Each
# scenario is a function that returns non-zero (after saying why) when the product misbehaves.
# Needs, besides what scenarios.sh needs: E2E_NODE_NAMES (cn1 cn2 cn3) and the cluster's
# per-node folders ($E2E_DIR/nodes/cnI: what each node sees as plugin-state and sys).

# shellcheck source-path=SCRIPTDIR source=scenarios.sh
source "$(dirname "${BASH_SOURCE[0]}")/scenarios.sh"  # api, wait_until, job_state, pool_adds_up, ...

read -r -a MN_NODES <<<"$E2E_NODE_NAMES"

# JOB: how many of JOB's ledger events of KIND there are on NODE (any node without one).
events_of_kind() {  # events_of_kind JOB KIND [NODE]
  api /v1/events "job=$1" |
    jq --arg k "$2" --arg n "${3:-}" '[.events[] | select(.kind == $k and ($n == "" or .node == $n))] | length'
}
# Every task of array JOB has a ready and a released event in the ledger; fails naming those
# that have not.
every_task_composed_and_released() {  # every_task_composed_and_released JOB
  local id missing=()
  for id in $(scontrol show job "$1" -o | grep -o '^JobId=[0-9]*' | cut -d= -f2); do
    [[ $(events_of_kind "$id" ready) -ge 1 && $(events_of_kind "$id" released) -ge 1 ]] ||
      missing+=("$id")
  done
  ((${#missing[@]} == 0)) ||
    fail "array $1: tasks without a compose and a release event: ${missing[*]}" || return 1
}
live_compositions() {  # live_compositions [JOB]: how many compositions are live (of JOB)
  api_all /v1/compositions "live=1${1:+&job=$1}" | jq '.compositions | length'
}
no_live_composition() { [[ $(live_compositions "${1:-}") == 0 ]]; }
job_nodes() { scontrol show hostnames "$(job_field "$1" NodeList)"; }
node_is_idle() { [[ $(node_state "$1") == idle ]]; }
state_file() { echo "$E2E_DIR/nodes/$2/plugin-state/job-$1.json"; }  # state_file JOB NODE

THREE_NODE_JOB=
scenario_three_node_job() {
  local j n ids all=() got=() want uuids
  # The brief sleep after srun keeps the job running while composerd is asked what it holds.
  # shellcheck disable=SC2016  # the job's shell expands them
  j=$(sbatch --parsable -N 3 -o "$OUT/%j.out" --compose-gpus=2 \
    --wrap 'srun -l bash -c "echo \$SLURMD_NODENAME \$CUDA_VISIBLE_DEVICES \$COMPOSER_GPUS"; sleep 5') ||
    return 1
  THREE_NODE_JOB=$j
  wait_until 30 state_is "$j" RUNNING || fail "job $j did not start ($(job_state "$j"))" || return 1
  [[ $(job_field "$j" Licenses) == fabric_gpu:6 ]] ||
    fail "licenses of job $j: $(job_field "$j" Licenses), expected fabric_gpu:6 (2 GPUs x 3 nodes)" ||
    return 1
  declare -A held=()
  for n in "${MN_NODES[@]}"; do
    wait_until 15 has_devices "$j" "$n" || fail "composerd holds nothing for job $j on $n" || return 1
    ids=$(attached_to_job_of_type "$j" gpu "$n")
    [[ $(count_ids "$ids") == 2 && $(count_ids "$(attached_to_job "$j" "$n")") == 2 ]] ||
      fail "composerd holds '$(attached_to_job "$j" "$n")' for job $j on $n, expected 2 GPUs" ||
      return 1
    held[$n]=$ids
    IFS=, read -r -a got <<<"$ids"
    all+=("${got[@]}")
    # Each node keeps its own state: the file is in that node's folder, not in the host's.
    [[ -e $(state_file "$j" "$n") ]] || fail "no state file of job $j on $n ($(state_file "$j" "$n"))" ||
      return 1
  done
  [[ ! -e $E2E_DIR/plugin-state/job-$j.json ]] ||
    fail "the host's own plugin-state has job $j's file: the nodes' state is not their own" || return 1
  [[ $(printf '%s\n' "${all[@]}" | sort -u | wc -l) == 6 ]] ||
    fail "the nodes of job $j share devices: ${all[*]}" || return 1
  wait_until 30 finished "$j" || fail "job $j did not finish" || return 1
  [[ $(job_state "$j") == COMPLETED ]] || fail "job $j ended $(job_state "$j")" || return 1
  # srun -l: "TASK: NODE CUDA_VISIBLE_DEVICES COMPOSER_GPUS", one task per node.
  for n in "${MN_NODES[@]}"; do
    uuids=$(gpu_uuids "${held[$n]}")
    want="^[0-9]+: $n $uuids ${held[$n]}\$"
    grep -qE "$want" "$OUT/$j.out" ||
      fail "no line '$n $uuids ${held[$n]}' in job $j's output: $(cat "$OUT/$j.out")" || return 1
  done
  wait_until 15 nothing_attached || fail "$(attached) devices still attached after job $j" || return 1
  no_live_composition "$j" || fail "job $j still has $(live_compositions "$j") live compositions" ||
    return 1
  pool_adds_up || fail "pool does not add up: $(api /v1/pool)" || return 1
  want=${MN_NODES[*]}
  [[ $(event_nodes "$j" ready) == "$want" ]] ||
    fail "ledger of job $j: composed on '$(event_nodes "$j" ready)', expected '$want'" || return 1
  [[ $(event_nodes "$j" released) == "$want" ]] ||
    fail "ledger of job $j: released on '$(event_nodes "$j" released)', expected '$want'" || return 1
  for n in "${MN_NODES[@]}"; do
    [[ ! -e $(state_file "$j" "$n") ]] || fail "state file of job $j left behind on $n" || return 1
  done
}

# sacct's record of a job: JobID|AllocTRES|AdminComment of the job's own line.
sacct_line() { sacct -j "$1" -X -o JobID,AllocTRES,AdminComment -P -n 2>/dev/null | head -1; }
sacct_has_licenses() { [[ $(sacct_line "$1") == *license/fabric_gpu=* ]]; }

scenario_accounting() {
  [[ -n $THREE_NODE_JOB ]] || scenario_three_node_job || fail "no three-node job to account" ||
    return 1
  local j=$THREE_NODE_JOB line tres comment
  # slurmctld sends the job's end to slurmdbd on its own time.
  wait_until 30 sacct_has_licenses "$j" ||
    fail "sacct has no license/fabric_gpu for job $j: '$(sacct_line "$j")'" || return 1
  line=$(sacct_line "$j")
  IFS='|' read -r _ tres comment <<<"$line"
  [[ ,$tres, == *,license/fabric_gpu=6,* ]] ||
    fail "sacct AllocTRES of job $j: $tres, expected license/fabric_gpu=6" || return 1
  [[ ,$tres, == *,gres/cgpu=6,* ]] || fail "sacct AllocTRES of job $j: $tres, expected gres/cgpu=6" ||
    return 1
  [[ $comment == "composer: gpus=2 nodes=3" ]] ||
    fail "sacct AdminComment of job $j: '$comment', expected 'composer: gpus=2 nodes=3'" || return 1
  # sreport reads slurmdbd's hourly rollups: a cluster minutes old has none yet, so this asks
  # that sreport answers (its report, license TRES included), not for figures.
  local report
  report=$(sreport -P -T license/fabric_gpu cluster utilization 2>&1) ||
    fail "sreport failed: $report" || return 1
  grep -q '^Cluster Utilization' <<<"$report" && grep -q '^Cluster|TRES Name|' <<<"$report" ||
    fail "sreport answered: $report" || return 1
}

scenario_node_failure() {
  local j victim t0 problem="" released_after
  # --no-requeue: Slurm requeues a batch job whose node fails (JobRequeue=1, the default);
  # this one must end NODE_FAIL.
  j=$(sbatch --parsable -N 2 --no-requeue -o /dev/null --compose-gpus=1 --wrap 'sleep 300') ||
    return 1
  wait_until 30 state_is "$j" RUNNING || cancel_and_fail "$j" "job $j did not start ($(job_state "$j"))" ||
    return 1
  local nodes n
  mapfile -t nodes < <(job_nodes "$j")
  ((${#nodes[@]} == 2)) || cancel_and_fail "$j" "job $j runs on '${nodes[*]}', expected 2 nodes" ||
    return 1
  for n in "${nodes[@]}"; do
    wait_until 15 has_devices "$j" "$n" || cancel_and_fail "$j" "composerd holds nothing for job $j on $n" ||
      return 1
  done
  victim=${nodes[-1]}  # not the batch host: nothing of the job runs there but its composition
  t0=$SECONDS
  kill -9 "$(cat "$E2E_DIR/run/slurmd-$victim.pid")"
  # Down after SlurmdTimeout=10 (slurm.conf), noticed at slurmctld's next ping.
  # SlurmdTimeout=10: about 30 s on an idle machine; the bound leaves room for a loaded one.
  if ! wait_until 120 state_is "$j" NODE_FAIL; then
    problem="job $j is $(job_state "$j") $((SECONDS - t0)) s after $victim's slurmd was killed, expected NODE_FAIL"
  else
    echo "  job $j NODE_FAIL $((SECONDS - t0)) s after the kill"
    t0=$SECONDS
    # compose=node: the surviving node's epilog releases its composition; the victim runs
    # none, so composerd's reconciler does (SlurmJobCheck): within ReconcileInterval (5) +
    # OrphanGrace (10) + a round: about 15 s idle; 45 s allowed for a loaded machine.
    # compose=controller: at NODE_FAIL the victim is no longer a completing node of the job,
    # so EpilogSlurmctld releases the whole job once the survivor's epilog is done.
    local by_reconciler="reconciler released the devices of a job Slurm no longer runs\" job=$j node=$victim"
    local released_by=$by_reconciler not_by="no such line"
    if [[ ${E2E_COMPOSE:-controller} == controller ]]; then
      released_by="msg=released job=$j node=$victim " not_by=$by_reconciler
    fi
    if ! wait_until 45 no_live_composition "$j"; then
      problem="job $j still has live compositions $((SECONDS - t0)) s after NODE_FAIL: $(api /v1/compositions "job=$j&live=1" | jq -c '[.compositions[] | {node, state}]'); composerd: $(grep "job=$j " "$E2E_DIR/log/composerd.log" | tail -4)"
    else
      released_after=$((SECONDS - t0))
      echo "  job $j's compositions released $released_after s after NODE_FAIL"
      if ! grep -qF "$released_by" "$E2E_DIR/log/composerd.log"; then
        problem="no '$released_by' in composerd.log: $(grep "job=$j " "$E2E_DIR/log/composerd.log" | tail -4)"
      elif grep -qF "$not_by" "$E2E_DIR/log/composerd.log"; then
        problem="'$not_by' in composerd.log: EpilogSlurmctld should have released job $j"
      elif [[ $(event_nodes "$j" released) != "$(printf '%s\n' "${nodes[@]}" | sort | paste -sd' ')" ]]; then
        problem="ledger of job $j: released on '$(event_nodes "$j" released)', expected '${nodes[*]}'"
      elif ! wait_until 15 nothing_attached; then
        problem="$(attached) devices attached after job $j's node failure"
      elif ! pool_adds_up; then
        problem="pool does not add up: $(api /v1/pool)"
      fi
    fi
  fi
  # The victim has run no epilog: its state file of the job is still there.
  local stale saved=$OUT/stale-job-$j.json
  stale=$(state_file "$j" "$victim")
  cp "$stale" "$saved" 2>/dev/null || problem+="${problem:+; }$victim has no state file of job $j after its slurmd was killed under it"
  # Whatever happened: the victim back, idle (ReturnToService=2 brings it back when its
  # slurmd registers; resume only if it did not), for the scenarios after this one.
  "$CLUSTER" start-slurmd "$victim" || problem+="${problem:+; }slurmd of $victim did not start again"
  if ! wait_until 30 node_is_idle "$victim"; then
    scontrol update nodename="$victim" state=resume
    wait_until 30 node_is_idle "$victim" ||
      problem+="${problem:+; }$victim is $(node_state "$victim") after its slurmd restarted"
  fi
  [[ -z $problem ]] || { fail "$problem"; return 1; }
  # When its slurmd registers again, Slurm has it end the job, and the epilog runs then
  # (measured on 22.05). A node that rebooted under the job may never run it, and keeps the
  # file: put back as such a node has it, the next composed job's prolog there removes it,
  # since composerd released the composition.
  if wait_until 15 bash -c "[[ ! -e $stale ]]"; then
    echo "  Slurm ran job $j's epilog on $victim once its slurmd was back"
  fi
  cp "$saved" "$stale"
  local next
  next=$(sbatch --parsable -w "$victim" -o /dev/null --compose-gpus=1 --wrap true) || return 1
  wait_until 60 finished "$next" ||
    cancel_and_fail "$next" "job $next on $victim did not run ($(job_state "$next"))" || return 1
  [[ $(job_state "$next") == COMPLETED ]] || fail "job $next on $victim ended $(job_state "$next")" ||
    return 1
  [[ ! -e $stale ]] || fail "$stale is still there after job $next ran on $victim" || return 1
  grep -qF "job $next on node $victim: removed the state file of job $j, whose composition on this node composerd released" \
    "$E2E_DIR/log/slurmd-$victim.log" ||
    fail "slurmd-$victim.log does not say that job $next's prolog removed job $j's state file" ||
    return 1
  echo "  job $next's prolog on $victim removed the state file job $j left there"
  wait_until 15 nothing_attached || fail "$(attached) devices attached after job $next"
}

# 200 tasks of one GPU each over three nodes and a pool of 8: tasks start on one node while
# another's epilog still releases the GPU Slurm already counted free (the prolog's free_wait).
scenario_array() {
  local j tasks=200 reconciled
  reconciled=$(reconciler_releases)
  # shellcheck disable=SC2016  # the job's shell expands them
  j=$(sbatch --parsable --array=0-$((tasks - 1)) -N 1 -o "$OUT/array-%A_%a.out" --compose-gpus=1 \
    --wrap 'echo "NODE=$SLURMD_NODENAME GPUS=$COMPOSER_GPUS"; sleep 1') || return 1
  wait_until 400 bash -c "[[ -z \$(squeue -h -j $j) ]]" || fail "array $j still queued" || return 1
  local states
  states=$(scontrol show job "$j" -o | grep -o 'JobState=[A-Z_]*' | sort | uniq -c | tr -s ' ')
  [[ $states == " $tasks JobState=COMPLETED" ]] || fail "array $j states: $states" || return 1
  local saw spread
  saw=$(grep -hx 'NODE=cn[0-9]* GPUS=[^,]\+' "$OUT"/array-"$j"_*.out 2>/dev/null | cut -d= -f3 |
    grep -cxFf <(device_ids gpu))
  [[ $saw == "$tasks" ]] || fail "only $saw of $tasks array tasks saw a GPU" || return 1
  spread=$(grep -ho '^NODE=cn[0-9]*' "$OUT"/array-"$j"_*.out | sort | uniq -c | tr -s ' ' | paste -sd,)
  echo "  tasks per node:$spread"
  wait_until 15 nothing_attached || fail "$(attached) devices leaked by array $j" || return 1
  [[ $(reconciler_releases) == "$reconciled" ]] ||
    fail "composerd's reconciler, not the epilogs, released tasks of array $j: $(grep -F "reconciler released" "$E2E_DIR/log/composerd.log" | tail -3)" ||
    return 1
  no_live_composition || fail "$(live_compositions) compositions still live after array $j" ||
    return 1
  pool_adds_up || fail "pool does not add up: $(api /v1/pool)" || return 1
  every_task_composed_and_released "$j"
}

scenario_requeue() {
  local j first second
  j=$(sbatch --parsable --requeue -N 1 -o /dev/null --compose-gpus=1 --wrap 'sleep 300') ||
    return 1
  wait_until 30 state_is "$j" RUNNING || cancel_and_fail "$j" "job $j did not start ($(job_state "$j"))" ||
    return 1
  first=$(job_field "$j" NodeList)
  wait_until 15 has_devices "$j" "$first" ||
    cancel_and_fail "$j" "composerd holds nothing for job $j on $first" || return 1
  scontrol requeue "$j" || cancel_and_fail "$j" "scontrol requeue $j refused" || return 1
  wait_until 30 no_live_composition "$j" ||
    cancel_and_fail "$j" "job $j requeued ($(job_state "$j")) but composerd still holds its devices on $first" ||
    return 1
  wait_until 30 state_is "$j" PENDING || cancel_and_fail "$j" "requeued job $j is $(job_state "$j")" ||
    return 1
  # Slurm holds a requeued job back until its old launch credential has expired (BeginTime:
  # cred_expire + 1 s, 30 s in this cluster's AuthInfo). scontrol update starttime=now is no
  # shortcut here: on the same node Slurm kills the job at once ("Job credential revoked").
  local problem="" t0=$SECONDS
  if ! wait_until 120 state_is "$j" RUNNING; then
    problem="requeued job $j did not run again ($(job_state "$j"), $(job_field "$j" Reason))"
  else
    second=$(job_field "$j" NodeList)
    echo "  job $j ran again $((SECONDS - t0)) s after its requeue, on $second (first on $first)"
    if ! wait_until 15 has_devices "$j" "$second"; then
      problem="job $j runs again on $second but composerd holds nothing for it: $(api "/v1/compositions/$j/$second" | jq -c '{state, last_error}')"
    elif [[ $(events_of_kind "$j" ready) != 2 || $(events_of_kind "$j" released) -lt 1 ]]; then
      problem="ledger of job $j: $(event_kinds "$j"), expected two compositions ready and a release"
    fi
  fi
  scancel "$j"
  wait_until 30 finished "$j" || problem+="${problem:+; }job $j not cancelled"
  wait_until 15 no_live_composition "$j" ||
    problem+="${problem:+; }job $j still has $(live_compositions "$j") live compositions after scancel"
  wait_until 15 nothing_attached || problem+="${problem:+; }$(attached) devices attached after job $j"
  [[ -z $problem ]] || fail "$problem"
}

# Node counts as job_submit prices them: a shape whose count is known is priced on it and
# pinned there (NumNodes=N-N); one whose count is not fixed, and a heterogeneous job, are
# refused with a sentence; a step cannot change its job's composition.
scenario_shapes() {
  local j err n
  err=$(sbatch -N 1-3 --compose-gpus=1 --wrap true 2>&1) && fail "-N 1-3 was accepted" && return 1
  grep -qF -- "-N 1-3: a composed job needs a fixed node count" <<<"$err" ||
    fail "-N 1-3 refused without the sentence: $err" || return 1
  err=$(sbatch -n 4 --compose-gpus=1 --wrap true 2>&1) && fail "-n 4 without -N was accepted" && return 1
  grep -qF -- "-n 4 without -N may run on 1 to 4 nodes" <<<"$err" ||
    fail "-n 4 refused without the sentence: $err" || return 1
  err=$(sbatch --compose-gpus=1 -n 1 : -n 1 --wrap true 2>&1) &&
    fail "a composed heterogeneous job was accepted" && return 1
  grep -qF "in a heterogeneous job" <<<"$err" || fail "heterogeneous job refused without the sentence: $err" ||
    return 1

  # -n 6 --ntasks-per-node=2: three nodes, one GPU each; the step asking for two is refused.
  # shellcheck disable=SC2016  # the job's shell expands them
  j=$(sbatch --parsable -n 6 --ntasks-per-node=2 -o "$OUT/%j.out" --compose-gpus=1 \
    --wrap 'srun --compose-gpus=2 true; echo "step rc=$?"; srun -l bash -c "echo \$SLURMD_NODENAME \$COMPOSER_GPUS"; sleep 3') ||
    return 1
  # Pending, Slurm shows the pinned range 3-3; once the job runs, the 3 nodes it got.
  [[ $(job_field "$j" Licenses) == fabric_gpu:3 && $(job_field "$j" NumNodes) =~ ^3(-3)?$ ]] ||
    cancel_and_fail "$j" "job $j (-n 6 --ntasks-per-node=2): licenses $(job_field "$j" Licenses), nodes $(job_field "$j" NumNodes); expected fabric_gpu:3 on 3-3" ||
    return 1
  wait_until 60 finished "$j" || cancel_and_fail "$j" "job $j did not finish" || return 1
  [[ $(job_state "$j") == COMPLETED ]] || fail "job $j ended $(job_state "$j")" || return 1
  grep -qF "a job step cannot change what its job's nodes attach" "$OUT/$j.out" ||
    fail "srun --compose-gpus=2 in job $j was not refused with the sentence: $(cat "$OUT/$j.out")" ||
    return 1
  grep -qx "step rc=0" "$OUT/$j.out" && fail "the refused step of job $j exited 0" && return 1
  for n in "${MN_NODES[@]}"; do
    [[ $(grep -cE "^[0-9]+: $n [^ ]+$" "$OUT/$j.out") == 2 ]] ||
      fail "job $j: expected two tasks with a GPU on $n: $(cat "$OUT/$j.out")" || return 1
  done
  [[ $(event_nodes "$j" ready) == "${MN_NODES[*]}" ]] ||
    fail "job $j composed on '$(event_nodes "$j" ready)', expected ${MN_NODES[*]}" || return 1

  # -w cn1,cn2: sbatch sends a minimum of 2 nodes only; the job is priced and pinned on 2.
  j=$(sbatch --parsable -H -w "${MN_NODES[0]},${MN_NODES[1]}" -o /dev/null --compose-gpus=1 --wrap true) ||
    return 1
  [[ $(job_field "$j" Licenses) == fabric_gpu:2 && $(job_field "$j" NumNodes) == 2-2 ]] ||
    cancel_and_fail "$j" "job $j (-w two nodes): licenses $(job_field "$j" Licenses), nodes $(job_field "$j" NumNodes); expected fabric_gpu:2 on 2-2" ||
    return 1
  scancel "$j"
  wait_until 15 nothing_attached || fail "$(attached) devices attached after the shapes" || return 1
  pool_adds_up || fail "pool does not add up: $(api /v1/pool)"
}

# The pool hands memory out in whole blocks and each node attaches at most MemSlots of them
# (here 4 blocks of 64G, 4 memory attach slots a node). Six jobs of 1G each: every one takes a
# block, so job_submit charges fabric_mem:64 and gres cmem:1 each; Slurm runs four at a time
# (the fourth fills the license, and a node's cmem), the other two pend on Licenses or
# Resources until a block is back, and none is started only to be refused by composerd and
# requeued (Restarts=0). Counted in GiB (6 of 256) Slurm started all six at once, two of them
# to wait in the controller's prolog for a block (CONFIGURING) or be requeued.
started_of() { squeue -h -t RUNNING,CONFIGURING -j "$(IFS=,; echo "$*")" -o %i 2>/dev/null | wc -l; }
all_finished() { local j; for j in "$@"; do finished "$j" || return 1; done; }
scenario_small_memory_jobs_wait_for_whole_blocks() {
  local ids=() j i blocks started most=0 reasons="" problem=""
  blocks=$(pool_total mem) || return 1
  for ((i = 0; i < 6; i++)); do
    j=$(sbatch --parsable -N 1 -o /dev/null --compose-mem=1G --wrap 'sleep 8') || return 1
    ids+=("$j")
  done
  [[ $(job_field "${ids[0]}" Licenses) == fabric_mem:64 &&
    $(job_field "${ids[0]}" TresPerNode) == "${GRES_PREFIX}cmem:1" ]] ||
    problem="job ${ids[0]} (1G of 64G blocks): licenses $(job_field "${ids[0]}" Licenses), GRES $(job_field "${ids[0]}" TresPerNode); expected fabric_mem:64 and cmem:1"
  local t0=$SECONDS
  while ! all_finished "${ids[@]}" && ((SECONDS - t0 < 150)); do
    started=$(started_of "${ids[@]}")
    ((started > most)) && most=$started
    for j in "${ids[@]}"; do
      [[ $(job_state "$j") == PENDING ]] && reasons+=" $(job_field "$j" Reason)"
    done
    sleep 0.5
  done
  all_finished "${ids[@]}" || problem+="${problem:+; }jobs still queued after 150 s: $(squeue)"
  ((most <= blocks)) ||
    problem+="${problem:+; }Slurm started $most jobs at once on a pool of $blocks blocks"
  ((most == blocks)) || problem+="${problem:+; }at most $most jobs started at once, expected $blocks"
  for j in "${ids[@]}"; do
    [[ $(job_state "$j") == COMPLETED && $(job_field "$j" Restarts) == 0 ]] ||
      problem+="${problem:+; }job $j ended $(job_state "$j") after $(job_field "$j" Restarts) restarts"
    [[ $(events_of_kind "$j" ready) == 1 ]] ||
      problem+="${problem:+; }job $j composed $(events_of_kind "$j" ready) times"
  done
  # A requeued job waits with reason BeginTime; one that waits for the pool, on Licenses (or
  # Resources, a node's cmem full), or None/Priority until the scheduler's next pass.
  local waited
  waited=$(tr ' ' '\n' <<<"$reasons" | sed '/^$/d' | sort | uniq -c | tr -s ' ' | paste -sd,)
  echo "  at most $most of 6 started at once; pending reasons seen:${waited:- none}"
  [[ $reasons == *Licenses* || $reasons == *Resources* ]] ||
    problem+="${problem:+; }no job pended on Licenses or Resources (reasons:${waited:- none})"
  [[ $reasons != *BeginTime* ]] || problem+="${problem:+; }a job was requeued (reason BeginTime)"
  wait_until 15 nothing_attached || problem+="${problem:+; }$(attached) devices attached after the jobs"
  [[ -z $problem ]] || { scancel "${ids[@]}" 2>/dev/null; fail "$problem"; }
}

# A job in a hidden partition keeps its devices while it runs: composerd's SlurmJobCheck asks
# squeue with --all. Hidden=YES hides the job from an unprivileged user's plain squeue (as the
# packaged composerd's user, composer), not from root's: here composerd runs as root, so the
# scenario shows with nobody's squeue that --all is what finds the job.
scenario_hidden_partition() {
  local j node
  j=$(sbatch --parsable -N 1 -p hidden -o "$OUT/%j.out" --compose-gpus=1 --wrap 'sleep 120') ||
    return 1
  wait_until 30 state_is "$j" RUNNING ||
    cancel_and_fail "$j" "job $j in the hidden partition did not start ($(job_state "$j"))" || return 1
  if runuser -u nobody -- squeue -h -o %i | grep -qx "$j"; then
    cancel_and_fail "$j" "an unprivileged plain squeue lists job $j: the partition is not hidden"
    return 1
  fi
  if ! runuser -u nobody -- squeue --all -h -o %i | grep -qx "$j"; then
    cancel_and_fail "$j" "an unprivileged squeue --all does not list job $j"
    return 1
  fi
  node=$(job_nodes "$j")
  wait_until 15 has_devices "$j" "$node" ||
    cancel_and_fail "$j" "composerd holds nothing for job $j on $node" || return 1
  # Rounds of ReconcileInterval=5 past OrphanGrace=10: a running job the check did not see
  # would have been released by now.
  sleep 25
  if [[ $(live_compositions "$j") != 1 ]] ||
    grep -qF "reconciler released the devices of a job Slurm no longer runs\" job=$j " \
      "$E2E_DIR/log/composerd.log"; then
    cancel_and_fail "$j" "job $j, running in a hidden partition, lost its composition: $(grep "job=$j " "$E2E_DIR/log/composerd.log" | tail -3)"
    return 1
  fi
  echo "  job $j in the hidden partition kept its composition for 25 s of reconcile rounds"
  scancel "$j"
  wait_until 30 finished "$j" || fail "job $j did not end after scancel ($(job_state "$j"))" ||
    return 1
  wait_until 30 no_live_composition "$j" ||
    fail "job $j still has $(live_compositions "$j") live compositions after it ended" || return 1
  wait_until 15 nothing_attached || fail "$(attached) devices attached after job $j"
}

# shellcheck disable=SC2034  # run.sh reads them
# compose=node: the dead node runs no epilog, and the reconciler releases its composition.
RECONCILER_MAY_RELEASE=(scenario_node_failure)
ALL_SCENARIOS=(
  scenario_three_node_job
  scenario_accounting
  scenario_shapes
  scenario_small_memory_jobs_wait_for_whole_blocks
  scenario_node_failure
  scenario_array
  scenario_requeue
  scenario_hidden_partition
)
if [[ ${E2E_COMPOSE:-controller} == controller ]]; then
  ALL_SCENARIOS+=(scenario_composerd_away_requeues_without_draining)
fi
