#!/usr/bin/env bash
# The active composerd killed under a job array, on the cluster cluster.sh starts with
# E2E_NODES=3 E2E_COMPOSERDS=2 (run by run_ha.sh): two composerd on one PostgreSQL, the plugstack
# and composer-slurmctld given both. Each scenario is a function that returns non-zero (after
# saying why) when the product misbehaves. Needs, besides what multinode_scenarios.sh needs,
# E2E_URLS (both composerd, comma-separated) and CLUSTER (cluster.sh).
# E2E_HA_TASKS (default 40): the array's tasks, one GPU each.

# shellcheck source-path=SCRIPTDIR source=multinode_scenarios.sh
source "$(dirname "${BASH_SOURCE[0]}")/multinode_scenarios.sh"  # api, wait_until, live_compositions, ...

# shellcheck disable=SC2153  # cluster.sh env exports it
read -r -a HA_URLS <<<"${E2E_URLS//,/ }"
HA_TASKS=${E2E_HA_TASKS:-40}

composerd_is() { [[ $(curl -fsS -m 2 "$2/v1/health" 2>/dev/null | jq -r .role) == "$1" ]]; }  # ROLE URL
health_field() { curl -fsS -m 2 "$1/v1/health" 2>/dev/null | jq -r ".$2"; }  # URL FIELD
active_index() {  # the number (1, 2) of the composerd that says it is active; fails if none
  local i
  for i in "${!HA_URLS[@]}"; do
    if composerd_is active "${HA_URLS[$i]}"; then
      echo $((i + 1))
      return 0
    fi
  done
  return 1
}
# An active composerd of an epoch above $1: E2E_URL is then that one's (the scenarios' api).
active_after_epoch() {
  local i
  i=$(active_index) || return 1
  (($(health_field "${HA_URLS[$((i - 1))]}" epoch) > $1)) || return 1
  E2E_URL=${HA_URLS[$((i - 1))]}
}
now_ms() { date +%s%3N; }
ctld_node_is_idle() { scontrol show node "$1" -o | grep -q ' State=IDLE '; }

# Every half second while the array runs, into $1: a node that is drained, down or failing
# (and why), and a device that two live compositions hold, as the active composerd has them.
# Silence while no composerd is active.
watch_cluster() {
  local out=$1 i url
  while :; do
    sinfo -h -N -o '%N %T %E' 2>/dev/null | awk '$2 ~ /drain|down|fail/ {print "node:", $0}' >>"$out"
    if i=$(active_index); then
      url=${HA_URLS[$((i - 1))]}
      E2E_URL=$url api_all /v1/compositions "live=1" 2>/dev/null |
        jq -r '[.compositions[] | .job as $j | .node as $n | .devices[] | {id, at: "\($j)/\($n)"}]
          | group_by(.id)[] | select(length > 1) | "device: \(.[0].id) in \(map(.at) | join(" and "))"' \
          >>"$out" 2>/dev/null
    fi
    sleep 0.5
  done
}

# The array: HA_TASKS tasks of one GPU each (2 s), over three nodes and a pool of 8 GPUs. Prints
# its job id.
submit_array() {
  # shellcheck disable=SC2016  # the job's shell expands them
  sbatch --parsable --array=0-$((HA_TASKS - 1)) -N 1 -o "$OUT/ha-$1-%A_%a.out" --compose-gpus=1 \
    --wrap 'echo "NODE=$SLURMD_NODENAME GPUS=$COMPOSER_GPUS"; sleep 2'
}

# After array $1 (tag $2): every task COMPLETED, each saw a GPU; prints how many were requeued
# (Restarts above 0) and the restarts in all.
array_outcome() {
  local j=$1 tag=$2 states saw
  states=$(scontrol show job "$j" -o | grep -o 'JobState=[A-Z_]*' | sort | uniq -c | tr -s ' ')
  [[ $states == " $HA_TASKS JobState=COMPLETED" ]] ||
    fail "array $j ($tag): task states:$states, expected $HA_TASKS COMPLETED" || return 1
  saw=$(cat "$OUT"/ha-"$tag"-"$j"_*.out 2>/dev/null | grep -cx 'NODE=cn[0-9]* GPUS=[^,]\+')
  [[ $saw == "$HA_TASKS" ]] || fail "array $j ($tag): only $saw of $HA_TASKS tasks saw a GPU" ||
    return 1
  scontrol show job "$j" -o | grep -o 'Restarts=[0-9]*' | cut -d= -f2 |
    awk '{ if ($1 > 0) n++; r += $1 } END { printf "%d %d\n", n, r }'
}

# The array once as it is, then again with the active composerd killed (SIGKILL) once a quarter
# of its tasks have finished; the killed one is started again, as systemd would, once the
# standby has taken over, and waits as a standby. Every task completes; no node is drained or
# down meanwhile; no device is in two live compositions; the ledger has the takeover; nothing
# is composed or attached afterwards. Prints both arrays' times, the takeover's, the requeues.
scenario_active_composerd_killed_during_array() {
  local j t0 base killed victim epoch t_kill took_over watch watcher problem="" outcome
  local requeued restarts took_ms done_n
  victim=$(active_index) || fail "no composerd is active" || return 1
  E2E_URL=${HA_URLS[$((victim - 1))]}
  watch=$OUT/ha-watch.log
  : >"$watch"
  watch_cluster "$watch" &
  watcher=$!

  # A fresh cluster's first jobs start slower (each slurmd's first launches): one untimed wave
  # first, so that the two timed arrays start alike.
  j=$(HA_TASKS=8 submit_array warm) || { kill "$watcher"; return 1; }
  wait_until 120 bash -c "[[ -z \$(squeue -h -j $j) ]]" || problem="array $j still queued after 120 s"
  [[ -z $problem ]] || { kill "$watcher"; scancel "$j" 2>/dev/null; fail "$problem"; return 1; }
  t0=$(now_ms)
  j=$(submit_array plain) || { kill "$watcher"; return 1; }
  wait_until 300 bash -c "[[ -z \$(squeue -h -j $j) ]]" || problem="array $j still queued after 300 s"
  base=$(($(now_ms) - t0))
  if [[ -z $problem ]]; then
    outcome=$(array_outcome "$j" plain) || problem="the array without a kill failed"
    read -r requeued restarts <<<"${outcome:-0 0}"
    echo "  without a kill: $HA_TASKS tasks in $((base / 1000)).$((base % 1000 / 100)) s, $requeued requeued"
  fi
  [[ -z $problem ]] || { kill "$watcher"; scancel "$j" 2>/dev/null; fail "$problem"; return 1; }

  epoch=$(health_field "$E2E_URL" epoch)
  t0=$(now_ms)
  j=$(submit_array killed) || { kill "$watcher"; return 1; }
  wait_until 120 bash -c "(( \$(scontrol show job $j -o | grep -c JobState=COMPLETED) >= $HA_TASKS / 4 ))" ||
    problem="array $j: a quarter of its tasks did not finish within 120 s"
  if [[ -z $problem ]]; then
    done_n=$(scontrol show job "$j" -o | grep -c 'JobState=COMPLETED')
    t_kill=$(now_ms)
    kill -KILL "$(cat "$E2E_DIR/run/composerd$( ((victim == 1)) || echo "-$victim").pid")"
    echo "  composerd $victim (active, epoch $epoch) killed with $done_n of $HA_TASKS tasks done, $(squeue -h -j "$j" -t CONFIGURING,RUNNING | wc -l) starting or running"
    if wait_until 60 active_after_epoch "$epoch"; then
      took_ms=$(($(now_ms) - t_kill))
      took_over=$(active_index)
      echo "  composerd $took_over active (epoch $(health_field "$E2E_URL" epoch)) $((took_ms / 1000)).$((took_ms % 1000 / 10)) s after the kill"
      # systemd's Restart=on-failure, once the standby has the leadership.
      "$CLUSTER" start-composerd "$victim" || problem="composerd $victim did not start again"
      [[ -n $problem ]] || composerd_is standby "${HA_URLS[$((victim - 1))]}" ||
        problem="composerd $victim, started again, is not a standby: $(curl -fsS "${HA_URLS[$((victim - 1))]}/v1/health")"
    else
      problem="no composerd took over within 60 s of the kill"
    fi
  fi
  wait_until 300 bash -c "[[ -z \$(squeue -h -j $j) ]]" ||
    problem+="${problem:+; }array $j still queued after 300 s more: $(squeue -h -j "$j" -o "%i %T %r" | head -5 | paste -sd,)"
  killed=$(($(now_ms) - t0))
  kill "$watcher" 2>/dev/null
  wait "$watcher" 2>/dev/null
  if [[ -n $problem ]]; then
    scancel "$j" 2>/dev/null
    fail "$problem"
    return 1
  fi
  outcome=$(array_outcome "$j" killed) || return 1
  read -r requeued restarts <<<"$outcome"
  echo "  with the kill: $HA_TASKS tasks in $((killed / 1000)).$((killed % 1000 / 100)) s ($((killed * 100 / base))% of the array without it), $requeued tasks requeued ($restarts restarts)"

  ! grep -q '^node:' "$watch" ||
    fail "nodes drained or down while the array ran: $(grep '^node:' "$watch" | sort -u | head -5)" ||
    return 1
  ! grep -q '^device:' "$watch" ||
    fail "a device in two live compositions: $(grep '^device:' "$watch" | sort -u | head -5)" || return 1
  local n
  for n in "${MN_NODES[@]}"; do
    # The last epilogs may still be ending when squeue no longer lists the array. slurmctld's
    # own state: sinfo -o %T was seen to say "mixed" for half a minute of a node that
    # scontrol, and sinfo -o '%T %C', said was idle with no CPU allocated (22.05).
    wait_until 30 ctld_node_is_idle "$n" ||
      fail "node $n is $(scontrol show node "$n" -o | grep -o ' State=[^ ]*') after the array ($(sinfo -h -R -n "$n"))" ||
      return 1
  done
  local takeovers
  takeovers=$(api_all /v1/events "since_ms=$t_kill" |
    jq -r '[.events[] | select(.kind == "takeover") | .detail] | join("; ")')
  [[ $takeovers == *"epoch $epoch -> "* ]] ||
    fail "the ledger has no takeover from epoch $epoch after the kill (takeover events: '$takeovers')" ||
    return 1
  echo "  ledger: $takeovers"
  wait_until 30 no_live_composition || fail "$(live_compositions) compositions still live after array $j" ||
    return 1
  wait_until 15 nothing_attached || fail "$(attached) devices attached after array $j" || return 1
  pool_adds_up || fail "pool does not add up: $(api /v1/pool)" || return 1
  every_task_composed_and_released "$j"
}

# shellcheck disable=SC2034  # run.sh reads it
ALL_SCENARIOS=(scenario_active_composerd_killed_during_array)
