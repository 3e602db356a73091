#!/usr/bin/env bash
# End-to-end scenarios on the cluster cluster.sh starts. Run by run.sh; each scenario is a
# function that returns non-zero (after saying why) when the product misbehaves.
# Needs: SLURM_CONF, E2E_DIR, E2E_PORT, MUNGE_SOCKET, NODE (cluster.sh env; E2E_URL, where
# composerd listens, defaults to loopback). Fabric-neutral: pool sizes come from the snapshot
# composerd publishes, device kinds from composerd's API. The helpers take a node where it
# matters (default NODE, the first node); multinode_scenarios.sh uses them on cn1..cnN.

OUT=$E2E_DIR/out
mkdir -p "$OUT"

# How this Slurm writes a GRES in a job's TRES fields: gres/NAME since 23.11, gres:NAME before.
slurm_version=$(sinfo --version | grep -oE '[0-9]+\.[0-9]+' | head -1)
if [[ $(printf '%s\n' "$slurm_version" 23.11 | sort -V | head -1) == 23.11 ]]; then
  GRES_PREFIX=gres/
else
  GRES_PREFIX=gres:
fi

fail() { echo "  FAIL: $*" >&2; return 1; }

E2E_URL=${E2E_URL:-http://127.0.0.1:$E2E_PORT}

# shellcheck source-path=SCRIPTDIR source=api.sh
source "$(dirname "${BASH_SOURCE[0]}")/api.sh"  # api, api_all
attached() { api_all /v1/devices "state=attached" | jq '.devices | length'; }
# The GPU UUIDs composerd reports for GPU ids (comma-separated), in the same order.
gpu_uuids() {
  api_all /v1/devices "type=gpu" | jq -r --arg ids "$1" \
    '(.devices | map({(.id): .identity.uuid}) | add) as $u |
     [$ids | split(",")[] | $u[.] // "unknown"] | join(",")'
}
attached_to_job() {  # JOB [NODE]: device ids composerd holds for JOB on NODE, comma-separated
  api "/v1/compositions/$1/${2:-$NODE}" |
    jq -r 'select(.state=="ready") | [.devices[].id] | join(",")'
}
# Composerd holds devices for JOB [on NODE] (a function, so that wait_until asks again).
has_devices() { [[ -n $(attached_to_job "$1" "${2:-$NODE}" 2>/dev/null) ]]; }  # quiet: 404 until it exists
# JOB TYPE [NODE]: the ids of JOB's devices of TYPE (gpu, mem, nvme) on NODE, comma-separated,
# in attach order.
attached_to_job_of_type() {
  api "/v1/compositions/$1/${3:-$NODE}" |
    jq -r --arg t "$2" 'select(.state=="ready") | [.devices[] | select(.type==$t) | .id] | join(",")'
}
count_ids() { [[ -z $1 ]] && echo 0 || tr ',' '\n' <<<"$1" | wc -l; }
device_ids() { api_all /v1/devices "type=$1" | jq -r '.devices[].id'; }
is_device_of_type() {  # is_device_of_type TYPE ID: composerd knows ID as a device of TYPE
  [[ -n $2 ]] && device_ids "$1" | grep -qxF -- "$2"
}
# How many devices of TYPE the pool holds, as composerd publishes it to the submit plugin.
pool_total() { jq -er --arg t "$1" '.pools[$t].total' "$E2E_DIR/composer/snapshot.json"; }
event_kinds() { api /v1/events "job=$1" | jq -r '[.events[].kind] | join(" ")'; }
pool_adds_up() {  # every row: free + attached + drained + failed + foreign == total, nothing attached
  api /v1/pool |
    jq -e 'all(.pool[]; .attached == 0 and .free + .drained + .failed + .foreign == .total)' \
      >/dev/null
}

# JOB FIELD: the field's value, the whole field name only (NodeList, not ReqNodeList).
job_field() {
  scontrol show job "$1" -o 2>/dev/null | grep -oE "(^| )$2=[^ ]*" | head -1 | sed 's/^ //' | cut -d= -f2-
}
job_state() { job_field "$1" JobState; }
wait_until() {  # wait_until SECONDS COMMAND...: polls every 0.2 s
  local limit=$1
  shift
  for ((i = 0; i < limit * 5; i++)); do
    "$@" && return 0
    sleep 0.2
  done
  return 1
}
state_is() { [[ $(job_state "$1") == "$2" ]]; }
finished() { [[ $(job_state "$1") =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)$ ]]; }
nothing_attached() { [[ $(attached) == 0 ]]; }
queued_jobs() { squeue -h | wc -l; }
node_state() { sinfo -h -n "$1" -o %T; }
# The nodes with an event of KIND for JOB, sorted, space-separated.
event_nodes() {  # event_nodes JOB KIND
  api /v1/events "job=$1" | jq -r --arg k "$2" '[.events[] | select(.kind == $k) | .node] | unique | join(" ")'
}
cancel_and_fail() {  # cancel_and_fail JOB SENTENCE: a job left running would hold its GPUs
  scancel "$1" 2>/dev/null
  fail "$2"
}
# Where jobs are composed (cluster.sh's E2E_COMPOSE): controller, the plugin's default, or node.
COMPOSE=${E2E_COMPOSE:-controller}
read -r -a ALL_NODES <<<"${E2E_NODE_NAMES:-$NODE}"
# How often composerd's reconciler has released the devices of an ended job so far: where
# the epilogs do their work it never has to.
reconciler_releases() {
  # Every composerd's log (composerd-2.log too, E2E_COMPOSERDS=2).
  cat "$E2E_DIR"/log/composerd*.log | grep -cF "reconciler released the devices of a job Slurm no longer runs"
}
# A line composer-slurmctld wrote (its stderr, log/composer-slurmctld.log in this harness).
ctld_said() { grep -qE -- "$1" "$E2E_DIR/log/composer-slurmctld.log" 2>/dev/null; }

# What one node's request of GIB GiB of memory holds as Slurm counts it (policies::mem_charge):
# the whole blocks of the pool's block size (the snapshot's largest_bytes). Prints BLOCKS GIB.
mem_charge() {
  jq -r --argjson gib "$1" '.pools.mem.largest_bytes as $b | ($gib * 1073741824) as $m |
    (($m + $b - 1) / $b | floor) as $n | "\($n) \(($n * $b + 1073741823) / 1073741824 | floor)"' \
    "$E2E_DIR/composer/snapshot.json"
}

scenario_batch_job_sees_its_devices() {
  local j blocks gib
  # On the fake host (host_check=wait), the job also shows the state of its memory's blocks.
  j=$(sbatch --parsable -o "$OUT/%j.out" --compose-gpus=2 --compose-mem=64G \
    --export=ALL,HOST_SYS="$E2E_DIR/host/sys" \
    --wrap 'env | grep -E "^(CUDA_VISIBLE_DEVICES|COMPOSER_)" | sort
            for b in "$HOST_SYS/devices/system/node/node$COMPOSER_MEM_NUMA"/memory*/state; do
              [ -e "$b" ] && echo "MEMORY_BLOCK=$(cat "$b")"
            done
            sleep 4') || return 1
  wait_until 30 state_is "$j" RUNNING || fail "job $j did not start ($(job_state "$j"))" || return 1
  # 64G in whole blocks of the pool (sim: one 64G block).
  read -r blocks gib < <(mem_charge 64)
  [[ $(job_field "$j" Licenses) == "fabric_gpu:2,fabric_mem:$gib" ]] ||
    fail "licenses of job $j: $(job_field "$j" Licenses), expected fabric_gpu:2,fabric_mem:$gib" ||
    return 1
  [[ $(job_field "$j" TresPerNode) == "${GRES_PREFIX}cgpu:2,${GRES_PREFIX}cmem:$blocks" ]] ||
    fail "GRES of job $j: $(job_field "$j" TresPerNode), expected cgpu:2,cmem:$blocks" || return 1
  scontrol show job "$j" | grep -q "AdminComment=composer: gpus=2 mem=64G nodes=1" ||
    fail "admin comment of job $j: $(scontrol show job "$j" | grep AdminComment)" || return 1
  local ids job_gpus
  wait_until 10 has_devices "$j" || fail "composerd shows nothing for $j" || return 1
  ids=$(attached_to_job "$j")
  job_gpus=$(attached_to_job_of_type "$j" gpu)
  [[ $(count_ids "$job_gpus") == 2 && $(count_ids "$(attached_to_job_of_type "$j" mem)") == 1 &&
    $(count_ids "$ids") == 3 ]] ||
    fail "composerd holds '$ids' for job $j, expected 2 GPUs and 1 memory block" || return 1
  wait_until 30 finished "$j" || fail "job $j did not finish" || return 1
  [[ $(job_state "$j") == COMPLETED ]] || fail "job $j ended $(job_state "$j")" || return 1
  local out=$OUT/$j.out gpus
  gpus=$(grep '^COMPOSER_GPUS=' "$out" | cut -d= -f2)
  [[ $gpus == "$job_gpus" ]] ||
    fail "job saw COMPOSER_GPUS='$gpus', composerd attached '$ids'" || return 1
  # The GPUs by the UUIDs the fabric reported (the node shows no GPU of its own), never a guess.
  local uuids
  uuids=$(gpu_uuids "$job_gpus")
  [[ $uuids == GPU-*,GPU-* ]] || fail "composerd reports no UUIDs for $job_gpus: $uuids" || return 1
  grep -qx "CUDA_VISIBLE_DEVICES=$uuids" "$out" ||
    fail "CUDA_VISIBLE_DEVICES: $(cat "$out"), composerd's UUIDs: $uuids" || return 1
  # NUMA node ids only: the block's node where the fabric gives one (sim) or the host made one
  # when it brought the region online (the fake host, host_check=wait), else nothing (redfish
  # reports no node), never a size standing in for one.
  local numa='^COMPOSER_MEM_NUMA=[0-9]+$'
  [[ $FABRIC == redfish && ${E2E_HOST_CHECK:-rescan} != wait ]] && numa='^COMPOSER_MEM_NUMA=$'
  grep -qE "$numa" "$out" || fail "COMPOSER_MEM_NUMA: $(cat "$out")" || return 1
  # The memory's region was brought online on that node (dax to kmem, its blocks online), and
  # is offline and given back once the job is over.
  if [[ ${E2E_HOST_CHECK:-rescan} == wait ]]; then
    [[ $(grep -c '^MEMORY_BLOCK=online$' "$out") == 2 && $(grep -c '^MEMORY_BLOCK=' "$out") == 2 ]] ||
      fail "the job's memory blocks: $(grep MEMORY_BLOCK "$out" || echo none)" || return 1
    local node
    node=$(grep '^COMPOSER_MEM_NUMA=' "$out" | cut -d= -f2)
    wait_until 15 bash -c "! compgen -G '$E2E_DIR/host/sys/devices/system/node/node$node/memory*'" ||
      fail "memory blocks of node $node left online after job $j" || return 1
  fi
  wait_until 15 nothing_attached || fail "$(attached) devices still attached after job $j" || return 1
  local kinds
  kinds=$(event_kinds "$j")
  [[ $kinds == *ready* && $kinds == *released* ]] || fail "ledger of job $j: $kinds" || return 1
  [[ ! -e $E2E_DIR/plugin-state/job-$j.json ]] || fail "state file of job $j left behind"
}

scenario_srun_job_sees_its_devices() {
  local out expected='^GPUS=([^ ,]+) NVME=([^ ,]+) CUDA=(GPU-[^ ,]+)$'
  out=$(srun --compose-gpus=1 --compose-nvme=1 \
    bash -c 'echo "GPUS=$COMPOSER_GPUS NVME=$COMPOSER_NVME CUDA=$CUDA_VISIBLE_DEVICES"' 2>&1) ||
    fail "srun failed: $out" || return 1
  [[ $out =~ $expected ]] || fail "srun task saw: $out" || return 1
  local gpu=${BASH_REMATCH[1]} nvme=${BASH_REMATCH[2]} cuda=${BASH_REMATCH[3]} drive=nvme
  if [[ ${E2E_HOST_CHECK:-rescan} == wait ]]; then
    # The drive's namespace, where the host shows the drive the prolog found by its serial.
    [[ $nvme =~ ^$E2E_DIR/host/dev/nvme[0-9]+n1$ ]] ||
      fail "srun task saw COMPOSER_NVME=$nvme, not a namespace of the host's drive" || return 1
    drive=namespace
  fi
  [[ $cuda == "$(gpu_uuids "$gpu")" ]] ||
    fail "srun task saw CUDA_VISIBLE_DEVICES=$cuda, composerd's UUID of $gpu: $(gpu_uuids "$gpu")" ||
    return 1
  is_device_of_type gpu "$gpu" && { [[ $drive == namespace ]] || is_device_of_type nvme "$nvme"; } ||
    fail "srun task saw devices composerd does not know as a GPU and an NVMe drive: $out" ||
    return 1
  wait_until 15 nothing_attached || fail "$(attached) devices still attached after srun"
}

scenario_salloc_job_sees_its_devices() {
  local out
  out=$(salloc --compose-mem=128G srun bash -c 'echo MEM=$COMPOSER_MEM_NUMA' 2>&1) ||
    fail "salloc failed: $out" || return 1
  # NUMA node ids where the fabric gives them (sim) or the host made them when it brought the
  # regions online (the fake host), else nothing (redfish), never a size.
  local numa='^MEM=[0-9]+(,[0-9]+)?$'
  [[ $FABRIC == redfish && ${E2E_HOST_CHECK:-rescan} != wait ]] && numa='^MEM=$'
  grep -qE "$numa" <<<"$out" || fail "salloc step saw: $out" || return 1
  wait_until 15 nothing_attached || fail "$(attached) devices still attached after salloc"
}

scenario_cancel_running_job_releases() {
  local j
  j=$(sbatch --parsable -o /dev/null --compose-gpus=3 --wrap 'sleep 300') || return 1
  wait_until 30 state_is "$j" RUNNING || fail "job $j did not start" || return 1
  wait_until 10 has_devices "$j" || fail "nothing attached to $j" || return 1
  scancel "$j"
  wait_until 30 finished "$j" || fail "job $j not cancelled" || return 1
  wait_until 15 nothing_attached || fail "$(attached) devices attached after cancelling $j" ||
    return 1
  [[ $(event_kinds "$j") == *released* ]] || fail "ledger of $j: $(event_kinds "$j")"
}

scenario_cancel_pending_job_composes_nothing() {
  local j
  j=$(sbatch --parsable --hold -o /dev/null --compose-gpus=1 --wrap 'true') || return 1
  state_is "$j" PENDING || fail "held job $j is $(job_state "$j")" || return 1
  scancel "$j"
  wait_until 15 finished "$j" || fail "job $j not cancelled" || return 1
  sleep 1
  nothing_attached || fail "$(attached) devices attached after cancelling pending $j" || return 1
  [[ -z $(event_kinds "$j") ]] || fail "pending job $j left events: $(event_kinds "$j")"
}

scenario_bad_flags_refused_by_sbatch() {
  local before err
  before=$(queued_jobs)
  for flag in --compose-gpus=two --compose-gpus=A100: --compose-mem=64X --compose-nvme=-1 \
    --workload='two words'; do
    if err=$(sbatch --hold --wrap true "$flag" 2>&1); then
      fail "sbatch accepted $flag" || return 1
    fi
    grep -q "composer: ${flag%%=*}=" <<<"$err" || fail "no sentence for $flag: $err" || return 1
  done
  [[ $(queued_jobs) == "$before" ]] || fail "a refused job was queued"
}

# The slot GRES are the plugin's alone: asked for by hand, in any spelling sbatch passes on,
# they are refused with a sentence, with or without a composed request.
scenario_hand_made_gres_refused() {
  local before err spelling spellings=(--gres=cgpu:1 --gres=cgpu --gres=cnvme:2 --gres=gpu:0,cgpu:1)
  # sbatch has --tres-per-task since 23.02.
  if sbatch --help 2>&1 | grep -q -- --tres-per-task; then
    spellings+=("-n1 --tres-per-task=${GRES_PREFIX}cgpu:1")  # it needs a task count
  fi
  before=$(queued_jobs)
  for spelling in "${spellings[@]}"; do
    for compose in "" --compose-gpus=1; do
      # shellcheck disable=SC2086  # $spelling may be two options
      if err=$(sbatch --hold --wrap true $compose $spelling 2>&1); then
        fail "sbatch accepted $spelling $compose" || return 1
      fi
      grep -q "composer: GRES 'c\(gpu\|nvme\)' is managed by the composer plugin" <<<"$err" ||
        fail "no sentence for $spelling $compose: $err" || return 1
    done
  done
  [[ $(queued_jobs) == "$before" ]] || fail "a refused job was queued"
}

scenario_impossible_request_refused_at_submit() {
  local before err pool too_many per_node
  pool=$(pool_total gpu) || fail "no GPU count in the snapshot" || return 1
  too_many=$((pool + 4))
  per_node=$((pool / 2 + 1))  # fits one node's share of the pool, not two nodes' worth
  before=$(queued_jobs)
  err=$(sbatch --hold --wrap true --compose-gpus=$too_many 2>&1) &&
    { fail "sbatch accepted $too_many GPUs"; return 1; }
  grep -q "composer: --compose-gpus=$too_many needs $too_many GPUs but the pool holds $pool" \
    <<<"$err" || fail "sentence: $err" || return 1
  err=$(sbatch --hold --wrap true --compose-gpus=H100:1 2>&1) && { fail "sbatch accepted H100"; return 1; }
  grep -q "the pool has no GPU of model 'H100'" <<<"$err" || fail "sentence: $err" || return 1
  err=$(sbatch --hold --wrap true --compose-gpus=1 --workload=gaming 2>&1) &&
    { fail "sbatch accepted workload gaming"; return 1; }
  grep -q "no such workload class" <<<"$err" || fail "sentence: $err" || return 1
  err=$(sbatch --hold --wrap true -N 2 --compose-gpus=$per_node 2>&1) &&
    { fail "sbatch accepted 2x$per_node GPUs"; return 1; }
  grep -q "on 2 nodes needs $((2 * per_node)) GPUs" <<<"$err" || fail "sentence: $err" || return 1
  [[ $(queued_jobs) == "$before" ]] || fail "a refused job was queued"
}

scenario_exhausted_pool_queues_on_licenses() {
  local a b pool
  pool=$(pool_total gpu) || fail "no GPU count in the snapshot" || return 1
  a=$(sbatch --parsable -o /dev/null --compose-gpus="$pool" --wrap 'sleep 6') || return 1
  wait_until 30 state_is "$a" RUNNING || fail "job $a did not start" || return 1
  b=$(sbatch --parsable -o /dev/null --compose-gpus=1 --wrap 'sleep 1') || return 1
  # The scheduler gives a pending job its reason on its next pass.
  wait_until 20 bash -c "scontrol show job $b -o | grep -qv 'Reason=None'"
  [[ $(job_state "$b") == PENDING ]] || fail "job $b is $(job_state "$b") while the pool is empty" ||
    return 1
  [[ $(job_field "$b" Reason) == Licenses ]] || fail "job $b pends for $(job_field "$b" Reason)" ||
    return 1
  wait_until 40 finished "$b" || fail "job $b never ran after $a" || return 1
  [[ $(job_state "$b") == COMPLETED ]] || fail "job $b ended $(job_state "$b")" || return 1
  wait_until 15 nothing_attached || fail "$(attached) devices attached afterwards"
}

scenario_array_of_50_leaks_nothing() {
  local j reconciled
  reconciled=$(reconciler_releases)
  j=$(sbatch --parsable --array=1-50 -o "$OUT/array-%A_%a.out" --compose-gpus=1 \
    --wrap 'echo "GPUS=$COMPOSER_GPUS"; sleep 1') || return 1
  wait_until 400 bash -c "[[ -z \$(squeue -h -j $j) ]]" || fail "array $j still queued" || return 1
  local done_ok
  done_ok=$(grep -hx 'GPUS=[^,]\+' "$OUT"/array-"$j"_*.out 2>/dev/null | cut -d= -f2 |
    grep -cxFf <(device_ids gpu))
  [[ $done_ok == 50 ]] || fail "only $done_ok of 50 array tasks saw a GPU" || return 1
  local states
  states=$(scontrol show job "$j" -o | grep -o 'JobState=[A-Z_]*' | sort | uniq -c | tr -s ' ')
  [[ $states == " 50 JobState=COMPLETED" ]] || fail "array states: $states" || return 1
  wait_until 15 nothing_attached || fail "$(attached) devices leaked by the array" || return 1
  [[ $(reconciler_releases) == "$reconciled" ]] ||
    fail "composerd's reconciler, not the epilogs, released tasks of array $j: $(grep -F "reconciler released" "$E2E_DIR/log/composerd.log" | tail -3)" ||
    return 1
  pool_adds_up || fail "pool does not add up: $(api /v1/pool)"
}

post() {  # post PATH BODY: POST with a munge credential
  curl -fsS -X POST -H 'Content-Type: application/json' \
    -H "Authorization: Munge $(munge -S "$MUNGE_SOCKET" -s "POST $1")" \
    --data "$2" "$E2E_URL$1" >/dev/null
}

scenario_refused_compose_fails_the_job_not_the_node() {
  # Every GPU drained after the snapshot: the job passes submit, composerd refuses at prolog.
  local id j
  for id in $(device_ids gpu); do post "/v1/devices/$id/drain" '{"reason":"e2e"}' || return 1; done
  j=$(sbatch --parsable -o "$OUT/%j.out" --compose-gpus=1 --wrap 'echo ran') || return 1
  wait_until 60 finished "$j"
  local state node_state
  state=$(job_state "$j")
  node_state=$(sinfo -h -n "$NODE" -o %T)
  for id in $(device_ids gpu); do post "/v1/devices/$id/resume" '{}'; done
  [[ $state == FAILED ]] || fail "job $j ended $state, expected FAILED" || return 1
  [[ $node_state != drain* ]] || fail "node drained for a refused request" || return 1
  ! grep -q '^ran' "$OUT/$j.out" 2>/dev/null || fail "job $j ran without its devices" || return 1
  grep -q "composer: prolog: job $j on node $NODE: compose .*failed (insufficient_resources)" \
    "$E2E_DIR/log/slurmd.log" || fail "no prolog line for job $j" || return 1
  wait_until 15 nothing_attached || fail "$(attached) devices attached afterwards"
}

# compose=controller: composerd refuses the job at PrologSlurmctld (every GPU drained after
# the snapshot, so the job passes submit). Slurm requeues it and drains no node; the job never
# runs without its devices, and runs once the pool can serve it.
scenario_refused_compose_requeues_the_job() {
  local id j problem=""
  for id in $(device_ids gpu); do post "/v1/devices/$id/drain" '{"reason":"e2e"}' || return 1; done
  j=$(sbatch --parsable -o "$OUT/%j.out" --compose-gpus=1 --wrap 'echo ran') || return 1
  # composer-slurmctld asks again for free_wait (30 s) before it gives up.
  wait_until 90 bash -c "scontrol show job $j -o | grep 'JobState=PENDING' | grep -q 'Restarts=[1-9]'" ||
    problem="job $j was not requeued after the refusal: $(job_state "$j") $(job_field "$j" Reason)"
  [[ $(node_state "$NODE") != drain* ]] ||
    problem+="${problem:+; }node $NODE drained for a refused request: $(sinfo -h -R)"
  ! grep -q '^ran' "$OUT/$j.out" 2>/dev/null ||
    problem+="${problem:+; }job $j ran without its devices"
  ctld_said "composer: prolog_slurmctld: job $j: compose compose-gpus=1 failed \(insufficient_resources\)" ||
    problem+="${problem:+; }composer-slurmctld did not say why job $j was refused"
  for id in $(device_ids gpu); do post "/v1/devices/$id/resume" '{}'; done
  [[ -z $problem ]] || cancel_and_fail "$j" "$problem" || return 1
  # Requeued jobs wait out cred_expire (30 s here) before they run again.
  wait_until 150 finished "$j" ||
    cancel_and_fail "$j" "job $j did not run once the GPUs were back ($(job_state "$j"), $(job_field "$j" Reason))" ||
    return 1
  [[ $(job_state "$j") == COMPLETED ]] && grep -q '^ran' "$OUT/$j.out" ||
    fail "job $j ended $(job_state "$j") once the GPUs were back" || return 1
  wait_until 15 nothing_attached || fail "$(attached) devices attached afterwards"
}

# Last: it drains the node on purpose, then brings everything back.
scenario_composerd_down_at_prolog_drains_and_requeues_held() {
  "$CLUSTER" stop-composerd
  local j
  j=$(sbatch --parsable -o /dev/null --compose-gpus=1 --wrap 'echo GPUS=$COMPOSER_GPUS') || {
    "$CLUSTER" start-composerd
    return 1
  }
  # The reason shows before the requeue itself, which waits for the epilog.
  wait_until 60 bash -c "scontrol show job $j -o | grep 'JobState=PENDING' | grep 'Restarts=1' |
    grep -q 'launch_failed_requeued_held'"
  local reason node_state
  reason=$(job_field "$j" Reason)
  node_state=$(sinfo -h -n "$NODE" -o %T)
  "$CLUSTER" start-composerd
  [[ $reason == launch_failed_requeued_held ]] || fail "job $j: reason $reason" || return 1
  [[ $node_state == drain* ]] || fail "node is $node_state, expected drained" || return 1
  sinfo -h -R | grep -q "Prolog error" || fail "drain reason: $(sinfo -h -R)" || return 1
  grep -q "composer: prolog: job $j on node $NODE: compose .* failed (unavailable).*on_unavailable=drain" \
    "$E2E_DIR/log/slurmd.log" || fail "no prolog line for job $j in slurmd.log" || return 1
  # An admin brings the node back and releases the job: it runs with its devices.
  scontrol update nodename="$NODE" state=resume
  scontrol release "$j"
  # Slurm delays a requeued job until its old launch credential expires (cred_expire, 30 s here).
  scontrol update jobid="$j" starttime=now
  wait_until 60 finished "$j" || fail "job $j did not run after release" || return 1
  [[ $(job_state "$j") == COMPLETED ]] || fail "job $j ended $(job_state "$j")" || return 1
  wait_until 15 nothing_attached || fail "$(attached) devices attached afterwards"
}

# compose=controller only: composerd away when a job starts. PrologSlurmctld fails, Slurm
# requeues the batch job and drains no node; once composerd is back the job runs, composed on
# each of its nodes (two where the cluster has them).
scenario_composerd_away_requeues_without_draining() {
  local j problem="" n nodes=$((${#ALL_NODES[@]} > 1 ? 2 : 1))
  "$CLUSTER" stop-composerd
  # shellcheck disable=SC2016  # the job's shell expands them
  j=$(sbatch --parsable -N "$nodes" -o "$OUT/%j.out" --compose-gpus=1 \
    --wrap 'srun -l bash -c "echo \$SLURMD_NODENAME \$COMPOSER_GPUS"') || {
    "$CLUSTER" start-composerd
    return 1
  }
  if ! wait_until 60 bash -c "scontrol show job $j -o | grep 'JobState=PENDING' | grep -q 'Restarts=[1-9]'"; then
    problem="job $j was not requeued while composerd was away: $(job_state "$j") $(job_field "$j" Reason)"
  fi
  for n in "${ALL_NODES[@]}"; do
    [[ $(node_state "$n") == drain* || $(node_state "$n") == down* ]] &&
      problem+="${problem:+; }node $n is $(node_state "$n") ($(sinfo -h -R -n "$n"))"
  done
  ctld_said "composer: prolog_slurmctld: job $j: compose compose-gpus=1 failed \(unavailable\)" ||
    problem+="${problem:+; }composer-slurmctld did not say that composerd was away for job $j"
  # An interactive job cannot wait in the queue: Slurm refuses it, and drains nothing either.
  local err
  if err=$(timeout 60 salloc -N 1 --compose-gpus=1 true 2>&1); then
    problem+="${problem:+; }salloc ran while composerd was away"
  elif ! grep -q "PrologSlurmctld failed" <<<"$err"; then
    problem+="${problem:+; }salloc refused without naming PrologSlurmctld: $err"
  fi
  for n in "${ALL_NODES[@]}"; do
    [[ $(node_state "$n") == drain* ]] && problem+="${problem:+; }node $n drained after salloc"
  done
  "$CLUSTER" start-composerd
  [[ -z $problem ]] || cancel_and_fail "$j" "$problem" || return 1
  # Requeued jobs wait out cred_expire (30 s here) before they run again.
  wait_until 150 finished "$j" || cancel_and_fail "$j" "job $j did not run once composerd was back ($(job_state "$j"), $(job_field "$j" Reason))" ||
    return 1
  [[ $(job_state "$j") == COMPLETED ]] || fail "job $j ended $(job_state "$j")" || return 1
  [[ $(grep -cE "^[0-9]+: [^ ]+ [a-z]+-" "$OUT/$j.out") == "$nodes" ]] ||
    fail "job $j's $nodes task(s) did not each see a GPU: $(cat "$OUT/$j.out")" || return 1
  [[ $(wc -w <<<"$(event_nodes "$j" ready)") == "$nodes" ]] ||
    fail "job $j composed on '$(event_nodes "$j" ready)', expected $nodes node(s)" || return 1
  wait_until 15 nothing_attached || fail "$(attached) devices attached after job $j"
}

# compose=controller: a composerd restart of a few seconds (shorter than outage_wait) requeues no
# job: composer-slurmctld asks again until composerd is back and says so in its log.
scenario_composerd_restart_requeues_nothing() {
  local j
  "$CLUSTER" stop-composerd
  j=$(sbatch --parsable -o "$OUT/%j.out" --compose-gpus=1 --wrap true) || {
    "$CLUSTER" start-composerd
    return 1
  }
  sleep 3
  "$CLUSTER" start-composerd
  wait_until 60 finished "$j" || cancel_and_fail "$j" "job $j did not run ($(job_state "$j"), $(job_field "$j" Reason))" ||
    return 1
  [[ $(job_state "$j") == COMPLETED && $(job_field "$j" Restarts) == 0 ]] ||
    fail "job $j ended $(job_state "$j") after $(job_field "$j" Restarts) restart(s)" || return 1
  ctld_said "composer: prolog_slurmctld: job $j: cannot connect to unix:.*; asking again for up to [0-9]+ s" ||
    fail "composer-slurmctld did not say it waited for composerd (job $j): $(tail -3 "$E2E_DIR/log/composer-slurmctld.log")" || return 1
  ctld_said "composer: prolog_slurmctld: job $j: composerd answered again after" ||
    fail "composer-slurmctld did not say composerd was back (job $j)" || return 1
  wait_until 15 nothing_attached || fail "$(attached) devices attached after job $j"
}

# What the fabric held before composerd came (the Redfish mockups' pre-composed and shared
# blocks) is foreign: never given to a job, never detached, whatever ran before this check.
scenario_foreign_devices_are_never_touched() {
  local foreign expected=0 used
  foreign=$(api_all /v1/devices "state=foreign" | jq -r '.devices[] | "\(.id) \(.holder)"') ||
    fail "cannot list foreign devices" || return 1
  [[ $FABRIC == redfish ]] && expected=1
  if ((expected)); then
    [[ -n $foreign ]] || fail "the mockups' composed blocks are not foreign" || return 1
  else
    [[ -z $foreign ]] || fail "the sim fabric shows foreign devices: $foreign" || return 1
  fi
  local compositions
  compositions=$(api_all /v1/compositions) || fail "cannot list compositions" || return 1
  while read -r id holder; do
    [[ -n $id ]] || continue
    [[ -n $holder ]] || fail "foreign device $id has no holder" || return 1
    used=$(jq -r --arg id "$id" \
      '[.compositions[] | select(any(.devices[]; .id == $id)) | .id] | join(",")' <<<"$compositions")
    [[ -z $used ]] || fail "foreign device $id was given to compositions $used" || return 1
  done <<<"$foreign"
  # The licenses Slurm schedules leave them out: each count is the pool's rows without their
  # failed and foreign devices, summed here from composerd's own pool rows.
  local type expected lic pool
  pool=$(api /v1/pool) || fail "cannot read the pool" || return 1
  for type in gpu nvme; do
    expected=$(jq -r --arg t "$type" \
      '[.pool[] | select(.type == $t) | .total - .failed - .foreign] | add // 0' <<<"$pool")
    lic=$(scontrol show license "fabric_$type" -o | grep -o 'Total=[0-9]*' | cut -d= -f2)
    [[ $lic == "$expected" ]] ||
      fail "fabric_$type Total=$lic; the pool without failed and foreign devices is $expected" ||
      return 1
  done
}

# E2E_HOST_CHECK=wait: a process outside the job still holds the job's drive when the job ends.
# The epilog waits busy_wait (5 s), then leaves the drive attached and has composerd hold the
# composition: the epilog succeeds, the node stays in service, neither EpilogSlurmctld nor the
# reconciler releases it. Sets HELD_JOB and HOLDER (the process, still running: the caller ends
# it).
hold_a_drive_past_its_job() {
  local j
  j=$(sbatch --parsable -o "$OUT/%j.out" --compose-nvme=1 --wrap 'echo "NVME=$COMPOSER_NVME"; sleep 2') ||
    return 1
  wait_until 30 state_is "$j" RUNNING || fail "job $j did not start ($(job_state "$j"))" || return 1
  wait_until 10 grep -qs '^NVME=/' "$OUT/$j.out" ||
    cancel_and_fail "$j" "job $j printed: $(cat "$OUT/$j.out")" || return 1
  local path
  path=$(sed -n 's/^NVME=//p' "$OUT/$j.out")
  [[ -e $path ]] || cancel_and_fail "$j" "job $j was told $path, which the host does not show" || return 1
  # Outside the job, so that Slurm does not end it with the job.
  setsid bash -c "exec 3<'$path'; exec sleep 300" </dev/null >/dev/null 2>&1 &
  local holder=$!
  wait_until 30 finished "$j" || { kill "$holder"; fail "job $j did not finish"; return 1; }
  wait_until 15 is_held "$j"
  local hold
  hold=$(hold_of "$j")
  [[ $hold == *"pid $holder holds"* ]] ||
    { kill "$holder"; fail "composerd's hold on job $j: '$hold' (pid $holder holds $path)"; return 1; }
  sleep 3  # EpilogSlurmctld (compose=controller) and a reconciler pass have had their turn
  local state node
  state=$(api "/v1/compositions/$j/$NODE" | jq -r .state)
  node=$(node_state "$NODE")
  [[ $state == ready ]] || { kill "$holder"; fail "the held composition of job $j is $state"; return 1; }
  [[ $node != drain* ]] ||
    { kill "$holder"; fail "node $NODE is $node: a held device must not drain it"; return 1; }
  grep -q "composer: epilog: job $j on node $NODE: devices still in use after 5 s: pid $holder holds" \
    "$E2E_DIR/log/slurmd.log" || { kill "$holder"; fail "no epilog line for job $j in slurmd.log"; return 1; }
  HELD_JOB=$j HOLDER=$holder
}

# A held composition's release: nothing attached, composerd's ledger and the state file.
held_composition_released() {  # held_composition_released JOB
  wait_until 15 nothing_attached || fail "$(attached) devices still attached" || return 1
  local kinds
  kinds=$(event_kinds "$1")
  [[ $kinds == *"hold unhold releasing released"* ]] || fail "ledger of job $1: $kinds" || return 1
  [[ ! -e $E2E_DIR/plugin-state/job-$1.json ]] || fail "state file of job $1 left behind"
}

# Once the process is gone, the next job's prolog on the node releases it.
scenario_device_still_in_use_is_held_then_released_by_the_next_job() {
  hold_a_drive_past_its_job || return 1
  kill "$HOLDER"
  # The next job on the node (composing nothing) releases the drive.
  local k
  k=$(sbatch --parsable -o /dev/null --wrap 'true') || return 1
  wait_until 30 finished "$k" || fail "job $k did not finish" || return 1
  held_composition_released "$HELD_JOB"
}

# On a node that runs no further job, composer-node-check (HealthCheckProgram) releases it once
# the process is gone, and not before.
scenario_held_device_is_released_by_the_node_check() {
  hold_a_drive_past_its_job || return 1
  local check out
  check=$(realpath -m "${COMPOSER_NODE_CHECK:-$BUILD_DIR/slurm-plugin/composer-node-check}")
  [[ -x $check ]] || { kill "$HOLDER"; fail "composer-node-check not built: $check"; return 1; }
  out=$(COMPOSER_PLUGSTACK=$E2E_DIR/etc/plugstack.conf SLURMD_NODENAME=$NODE "$check" 2>&1) ||
    { kill "$HOLDER"; fail "composer-node-check failed while the drive is held: $out"; return 1; }
  [[ $out == *"job $HELD_JOB's devices stay held: pid $HOLDER holds"* ]] ||
    { kill "$HOLDER"; fail "composer-node-check said: $out"; return 1; }
  [[ $(api "/v1/compositions/$HELD_JOB/$NODE" | jq -r .state) == ready ]] ||
    { kill "$HOLDER"; fail "the node check released job $HELD_JOB's drive under its holder"; return 1; }
  kill "$HOLDER"
  wait "$HOLDER" 2>/dev/null || true
  # As slurmd runs it every HealthCheckInterval: until the host's /proc no longer shows the
  # holder (the fake host follows the real /proc a moment later).
  local tries=0
  until [[ $out == *"job $HELD_JOB's devices are no longer in use: released"* ]]; do
    ((++tries <= 20)) || fail "composer-node-check said: $out" || return 1
    sleep 0.5
    out=$(COMPOSER_PLUGSTACK=$E2E_DIR/etc/plugstack.conf SLURMD_NODENAME=$NODE "$check" 2>&1) ||
      fail "composer-node-check failed: $out" || return 1
  done
  held_composition_released "$HELD_JOB"
}

# E2E_HOST_CHECK=wait: the job's CXL memory has pages that cannot move when it ends (the fake
# host's busy-memory): the epilog cannot offline its blocks, so it leaves the region attached
# and online and has composerd hold it, without draining the node. Once the pages can move, the
# next job's prolog offlines and releases it.
scenario_memory_in_use_is_held_not_detached() {
  touch "$E2E_DIR/host/busy-memory"
  local j
  j=$(sbatch --parsable -o /dev/null --compose-mem=64G --wrap 'sleep 1') || return 1
  wait_until 60 finished "$j" || cancel_and_fail "$j" "job $j did not finish" || return 1
  wait_until 30 is_held "$j" || fail "job $j's memory was not held ($(hold_of "$j"))" || return 1
  local hold state node
  hold=$(hold_of "$j")
  state=$(api "/v1/compositions/$j/$NODE" | jq -r .state)
  node=$(node_state "$NODE")
  rm -f "$E2E_DIR/host/busy-memory"
  [[ $hold == *"would not go offline"* ]] || fail "composerd's hold on job $j: '$hold'" || return 1
  [[ $state == ready ]] || fail "the held composition of job $j is $state" || return 1
  [[ $node != drain* ]] || fail "node $NODE is $node: busy memory must not drain it" || return 1
  local k
  k=$(sbatch --parsable -o /dev/null --wrap 'true') || return 1
  wait_until 30 finished "$k" || fail "job $k did not finish" || return 1
  held_composition_released "$j"
}

# E2E_HOST_CHECK=wait: the fabric attaches a GPU the host never shows. The prolog fails after
# host_wait (10 s) with one line naming the device, drains that device in composerd and gives
# the devices back; Slurm drains the node and requeues the job held. An admin resumes the node
# and the device; nothing stays attached.
scenario_device_never_appearing_fails_cleanly() {
  echo 1 >"$E2E_DIR/host/hide-next"
  local j
  j=$(sbatch --parsable -o /dev/null --compose-gpus=1 --wrap 'true') || return 1
  local line="composer: prolog: job $j on node $NODE: composerd attached .* but the host cannot use them: the host does not show"
  wait_until 60 grep -q "$line" "$E2E_DIR/log/slurmd.log" ||
    cancel_and_fail "$j" "no prolog line for job $j: $(grep -F "job $j" "$E2E_DIR/log/slurmd.log" | tail -3)" ||
    return 1
  wait_until 30 node_drained "$NODE" ||
    cancel_and_fail "$j" "node $NODE is $(node_state "$NODE"), expected drained after the failed prolog" || return 1
  scancel "$j"
  wait_until 30 finished "$j" || fail "job $j not cancelled" || return 1
  scontrol update nodename="$NODE" state=resume
  wait_until 15 nothing_attached || fail "$(attached) devices attached after job $j" || return 1
  # The fake host forgets a hidden device once a rescan finds it detached: without one, the next
  # job given the same GPU would not see it either.
  echo 1 >"$E2E_DIR/host/sys/bus/pci/rescan"
  wait_until 30 node_idle "$NODE" || fail "node $NODE is $(node_state "$NODE") after resume" || return 1
  [[ $(event_kinds "$j") == *released* ]] || fail "ledger of $j: $(event_kinds "$j")" || return 1
  local unseen
  unseen=$(api_all /v1/devices "state=drained" |
    jq -r --arg why "never showed it after the attach for job $j" \
      '[.devices[] | select(.drain_reason | contains($why)) | .id] | join(",")')
  [[ -n $unseen && $unseen != *,* ]] ||
    fail "drained for job $j: '$unseen' (expected the one GPU the host never showed)" || return 1
  "${COMPOSERCTL:-$BUILD_DIR/composer/cli/composerctl}" --server "$E2E_URL" \
    --munge-socket "$MUNGE_SOCKET" devices resume "$unseen" >/dev/null ||
    fail "composerctl devices resume $unseen failed"
}
# E2E_HOST_CHECK=wait: NVML (tests/slurm's fake libnvidia-ml.so.1, scripted) reports a running
# job's GPU bad (XID 79). composer-node-check tells composerd, which fails the GPU and gives the
# job its class's reaction (notify without a policy) within a reconciler round; the node stays in
# service. After the job the GPU stays out of the pool until an admin resumes it.
failed_gpus() { api_all /v1/devices "state=failed" | jq -r '[.devices[].id] | join(",")'; }
reacted() { [[ $(event_kinds "$1") == *degraded* || $(event_kinds "$1") == *requeued* ]]; }
scenario_bad_gpu_fails_its_job_not_the_node() {
  local nvml
  nvml=$(realpath -m "${FAKE_NVML:-$BUILD_DIR/tests/slurm/fake_nvml/libnvidia-ml.so.1}")
  [[ -f $nvml ]] || { echo "  (no fake libnvidia-ml at $nvml: nothing to check)"; return 0; }
  local j
  j=$(sbatch --parsable -o /dev/null --compose-gpus=1 --wrap 'sleep 300') || return 1
  local file=$E2E_DIR/plugin-state/job-$j.json
  wait_until 60 test -f "$file" || cancel_and_fail "$j" "job $j has no state file" || return 1
  wait_until 60 state_is "$j" RUNNING || cancel_and_fail "$j" "job $j is $(job_state "$j")" ||
    return 1
  local gpu address
  gpu=$(jq -r '[.devices[] | select(.type=="gpu")][0].id' "$file")
  address=$(jq -r '[.devices[] | select(.type=="gpu")][0].address' "$file")
  local plugstack=$E2E_DIR/etc/plugstack-nvml.conf script=$E2E_DIR/nvml-script
  sed "s|spank_composer.so |spank_composer.so nvml_library=$nvml |" "$E2E_DIR/etc/plugstack.conf" \
    >"$plugstack"
  echo "$address xid 79" >"$script"
  local check out
  check=$(realpath -m "${COMPOSER_NODE_CHECK:-$BUILD_DIR/slurm-plugin/composer-node-check}")
  out=$(FAKE_NVML_SCRIPT=$script COMPOSER_PLUGSTACK=$plugstack SLURMD_NODENAME=$NODE "$check" 2>&1) ||
    cancel_and_fail "$j" "composer-node-check failed: $out" || return 1
  [[ $out == *"$gpu reported failed to composerd: NVML reports critical XID 79 at $address"* ]] ||
    cancel_and_fail "$j" "composer-node-check said: $out" || return 1
  [[ $(failed_gpus) == "$gpu" ]] || cancel_and_fail "$j" "failed: '$(failed_gpus)', expected $gpu" ||
    return 1
  wait_until 30 reacted "$j" || cancel_and_fail "$j" "no reaction for job $j: $(event_kinds "$j")" ||
    return 1
  ! node_drained "$NODE" || cancel_and_fail "$j" "node $NODE drained for a GPU" || return 1
  scancel "$j"
  wait_until 30 finished "$j" || fail "job $j not cancelled" || return 1
  wait_until 30 nothing_attached || fail "$(attached) devices attached after job $j" || return 1
  # The fake host forgets what it showed once a rescan finds it detached (hide-next hides only
  # a device it never showed).
  echo 1 >"$E2E_DIR/host/sys/bus/pci/rescan"
  [[ $(failed_gpus) == "$gpu" ]] || fail "after job $j: failed '$(failed_gpus)', expected $gpu" ||
    return 1
  ! node_drained "$NODE" || fail "node $NODE drained after job $j" || return 1
  "${COMPOSERCTL:-$BUILD_DIR/composer/cli/composerctl}" --server "$E2E_URL" \
    --munge-socket "$MUNGE_SOCKET" devices resume "$gpu" >/dev/null ||
    fail "composerctl devices resume $gpu failed" || return 1
  [[ -z $(failed_gpus) ]] || fail "still failed after the resume: $(failed_gpus)"
}

hold_of() { api "/v1/compositions/$1/$NODE" | jq -r '.hold // empty'; }  # JOB: why its node holds it
is_held() { [[ -n $(hold_of "$1") ]]; }
node_drained() { [[ $(node_state "$1") == drain* ]]; }
node_idle() { [[ $(node_state "$1") == idle ]]; }

ALL_SCENARIOS=(
  scenario_batch_job_sees_its_devices
  scenario_srun_job_sees_its_devices
  scenario_salloc_job_sees_its_devices
  scenario_cancel_running_job_releases
  scenario_cancel_pending_job_composes_nothing
  scenario_bad_flags_refused_by_sbatch
  scenario_hand_made_gres_refused
  scenario_impossible_request_refused_at_submit
  scenario_exhausted_pool_queues_on_licenses
  scenario_array_of_50_leaks_nothing
  scenario_refused_compose_fails_the_job_not_the_node
  scenario_composerd_down_at_prolog_drains_and_requeues_held
  scenario_foreign_devices_are_never_touched
)
if [[ ${E2E_HOST_CHECK:-rescan} == wait ]]; then
  ALL_SCENARIOS+=(scenario_device_still_in_use_is_held_then_released_by_the_next_job
    scenario_held_device_is_released_by_the_node_check scenario_bad_gpu_fails_its_job_not_the_node
    scenario_device_never_appearing_fails_cleanly)
  ALL_SCENARIOS+=(scenario_memory_in_use_is_held_not_detached)
fi
if [[ $COMPOSE == controller ]]; then
  ALL_SCENARIOS=("${ALL_SCENARIOS[@]/scenario_refused_compose_fails_the_job_not_the_node/scenario_refused_compose_requeues_the_job}")
  ALL_SCENARIOS=("${ALL_SCENARIOS[@]/scenario_composerd_down_at_prolog_drains_and_requeues_held/scenario_composerd_away_requeues_without_draining}")
  ALL_SCENARIOS+=(scenario_composerd_restart_requeues_nothing)
fi
