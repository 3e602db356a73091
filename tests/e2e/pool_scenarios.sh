# shellcheck shell=bash
# Sourced by the suites whose composerd keeps Slurm's licenses in step with the pool
# (SlurmSync=yes): policy_scenarios.sh (slurm.conf's licenses held down by hold reservations)
# and remote_license_scenarios.sh (slurmdbd's remote licenses, E2E_SLURM_LICENSES=remote).
# Needs scenarios.sh's helpers, ctl (composerctl against the cluster), E2E_GPU_MODELS with 4
# A100-80G and 4 H100, and an inference class that no cap holds below the pool.
#   - 2 of 8 GPUs drained: a job for 8 pends on Licenses and never starts; resumed, it starts;
#   - the same with 2 GPUs the fabric reports failed (the sim fabric's SimHealthFile);
#   - per-model licenses: with the 4 H100 in use a job for an H100 pends on Licenses while a
#     job for A100s runs, then runs itself, never refused at compose time.

# The name Slurm gives one of the pool's licenses: NAME, or NAME@composer where it is remote.
slurm_license() {
  if [[ ${E2E_SLURM_LICENSES:-local} == remote ]]; then echo "$1@composer"; else echo "$1"; fi
}
# What Slurm may hand out of a pool license now: its total less composerd's hold reservation
# (local), or its total (remote: composerd sets it).
pool_license_now() {
  local name total held
  name=$(slurm_license "$1")
  total=$(scontrol -o show licenses "$name" | grep -o 'Total=[0-9]*' | cut -d= -f2)
  held=$(scontrol -o show reservation "hold_$1" 2>/dev/null | grep -o "Licenses=$1:[0-9]*" | cut -d: -f2)
  echo $((${total:-0} - ${held:-0}))
}
pool_license_is() { [[ $(pool_license_now "$1") == "$2" ]]; }

# With 2 of the 8 GPUs out of service (`$1` says how): Slurm hands out 6, and a job for 8 asked
# for as inference pends on Licenses; its id in J8.
eight_gpu_job_pends() {
  wait_until 15 pool_license_is fabric_gpu 6 ||
    fail "Slurm hands out $(pool_license_now fabric_gpu) GPUs with 2 $1, expected 6: $(scontrol -o show licenses; scontrol -o show reservation)" ||
    return 1
  J8=$(sbatch --parsable -o "$OUT/%j.out" -t 2 --compose-gpus=8 --workload=inference \
    --wrap 'echo ran') || return 1
  sleep 8
  [[ $(job_state "$J8") == PENDING && $(job_field "$J8" Reason) == Licenses ]] ||
    fail "job $J8 is $(job_state "$J8") ($(job_field "$J8" Reason)), expected pending on Licenses"
}
# The GPUs are back: the job for 8 starts and completes.
eight_gpu_job_runs() {
  wait_until 30 state_is "$J8" RUNNING || wait_until 30 finished "$J8" ||
    fail "job $J8 never started once the GPUs were back: $(squeue)" || return 1
  wait_until 60 finished "$J8" || fail "job $J8 did not finish" || return 1
  [[ $(job_state "$J8") == COMPLETED ]] || fail "job $J8 ended $(job_state "$J8")"
}

drained_gpus_hold_jobs_on_licenses() {
  local ids
  ids=$(api_all /v1/devices "type=gpu" | jq -r '.devices[].id' | head -2)
  for id in $ids; do post "/v1/devices/$id/drain" '{"reason":"e2e"}' || return 1; done
  eight_gpu_job_pends drained || return 1
  for id in $ids; do post "/v1/devices/$id/resume" '{}' || return 1; done
  eight_gpu_job_runs || return 1
  # Nothing left to hold back: no hold (deleted, as 26.05 refuses a count of 0; none at all
  # with remote licenses).
  wait_until 8 bash -c "! scontrol -o show reservation hold_fabric_gpu >/dev/null 2>&1" ||
    fail "the hold still stands after the resume: $(scontrol -o show reservation)" || return 1
  local refused
  refused=$(grep -E "changes made were undone|plan applied in part" "$E2E_DIR/log/composerd.log")
  [[ -z $refused ]] || fail "Slurm refused a change composerd made during the suite: $refused"
}

# The same through the fabric: the sim fabric reports 2 GPUs failed (its SimHealthFile), Slurm
# follows, an 8-GPU job pends on Licenses and explain says why; healed, the job starts.
failed_gpus_hold_jobs_on_licenses() {
  local ids id
  ids=$(api_all /v1/devices "type=gpu" | jq -r '.devices[].id' | tail -2)
  for id in $ids; do echo "$id critical"; done >"$E2E_DIR/composer/sim-health"
  eight_gpu_job_pends failed || return 1
  ctl explain "$J8" | grep -q "fabric_gpu.*: The pool's 8 GPUs: 2 failed" ||
    fail "explain $J8: $(ctl explain "$J8" 2>&1)" || return 1
  for id in $ids; do echo "$id ok"; done >"$E2E_DIR/composer/sim-health"
  eight_gpu_job_runs
}

# Per-model licenses (fabric_gpu_h100 beside fabric_gpu): with every H100 in use, a job for
# one more H100 waits on Licenses while a job for A100s starts, and never starts to fail.
exhausted_model_waits_while_another_runs() {
  local a b c lic h100
  h100=$(slurm_license fabric_gpu_h100)
  wait_until 10 grep -q '"fabric_gpu_h100"' "$E2E_DIR/composer/snapshot.json" ||
    fail "the snapshot lists no model license: $(jq -c .model_licenses "$E2E_DIR/composer/snapshot.json")" ||
    return 1
  a=$(sbatch --parsable -o "$OUT/%j.out" -t 4 --compose-gpus=H100:4 --workload=inference \
    --wrap 'sleep 150') || return 1
  wait_until 30 state_is "$a" RUNNING || fail "job $a (4 H100) did not start: $(squeue)" ||
    return 1
  lic=$(job_field "$a" Licenses)
  [[ ,$lic, == *,$(slurm_license fabric_gpu):4,* && ,$lic, == *,$h100:4,* ]] ||
    fail "licenses of $a: $lic" || return 1
  b=$(sbatch --parsable -o "$OUT/%j.out" -t 2 --compose-gpus=H100:1 --workload=inference \
    --wrap 'echo ran') || return 1
  c=$(sbatch --parsable -o "$OUT/%j.out" -t 2 --compose-gpus=A100-80G:2 --workload=inference \
    --wrap 'sleep 5') || return 1
  wait_until 30 state_is "$c" RUNNING || wait_until 5 finished "$c" ||
    fail "job $c (2 A100) did not start beside the H100 job: $(squeue)" || return 1
  [[ ,$(job_field "$b" Licenses), == *,$h100:1,* ]] ||
    fail "licenses of $b: $(job_field "$b" Licenses)" || return 1
  # Backfill starts the A100 job and leaves the H100 job's reason None; the main scheduler's
  # periodic pass (sched_interval, 60 s) gives it Licenses.
  wait_until 75 bash -c "scontrol -o show job $b | grep -q 'JobState=PENDING Reason=Licenses '" ||
    fail "job $b (1 H100) is $(job_state "$b") ($(job_field "$b" Reason)), expected pending on Licenses" ||
    return 1
  state_is "$a" RUNNING || fail "job $a (4 H100) is $(job_state "$a"), expected running" || return 1
  ctl explain "$b" | grep -q "$h100 (1 asked, 0 free) holds it" ||
    fail "explain $b: $(ctl explain "$b" 2>&1)" || return 1
  scancel "$a" || return 1
  wait_until 30 finished "$a" || fail "job $a did not end" || return 1
  wait_until 30 finished "$b" || fail "job $b never ran after the H100s came back: $(squeue)" ||
    return 1
  wait_until 30 finished "$c" || fail "job $c did not finish" || return 1
  [[ $(job_state "$b") == COMPLETED && $(job_state "$c") == COMPLETED ]] ||
    fail "jobs ended $(job_state "$b") and $(job_state "$c")" || return 1
  # Never started to be refused: composerd's ledger has no refusal for it.
  [[ $(api /v1/events "job=$b" | jq '[.events[] | select(.kind == "refused")] | length') == 0 ]] ||
    fail "job $b was refused at compose time: $(api /v1/events "job=$b")"
}
